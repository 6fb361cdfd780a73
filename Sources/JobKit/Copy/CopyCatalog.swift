import Foundation

/// One localized message.
package struct CopyMessage: Codable, Sendable, Hashable {
    package let title: String
    package let body: String

    /// Replaces `{name}` placeholders with values.
    package func rendered(_ values: [String: String]) -> CopyMessage {
        guard !values.isEmpty else { return self }
        func fill(_ text: String) -> String {
            values.reduce(text) { $0.replacingOccurrences(of: "{\($1.key)}", with: $1.value) }
        }
        return CopyMessage(title: fill(title), body: fill(body))
    }
}

/// The copy chosen for one notification.
package struct CopyChoice: Sendable, Hashable {
    /// The catalog locale actually used after fallback (`pt-BR` → `pt` → `en`).
    package let locale: String
    /// The index of the message in that locale's list; recorded in the log so that the next one differs.
    package let index: Int
    package let message: CopyMessage
}

/// Localized notification copy: several messages per notification type and locale.
///
/// The catalog is JSON — `{"diary_reminder": {"en": [{"title": …, "body": …}, …], "ja": […]}, …}` —
/// validated as a whole when loaded: every problem is reported at once, with its path.
package struct CopyCatalog: Sendable {
    package static let fallbackLocale = "en"
    /// The language of ``fallbackLocale``: a reader of it is served, whatever the region.
    static let fallbackLanguage = LocaleKey(fallbackLocale)?.language
    /// Longest title, in characters (grapheme clusters), before placeholders are filled.
    package static let maxTitleLength = 60
    /// Longest body, in characters (grapheme clusters), before placeholders are filled.
    package static let maxBodyLength = 180
    /// Longest title in UTF-8 bytes: a character can be many bytes (a letter with 150 combining accents is one
    /// character of 301 bytes), and the provider's limit (4,096 bytes per payload) counts bytes.
    package static let maxTitleBytes = 256
    /// Longest body in UTF-8 bytes.
    package static let maxBodyBytes = 1024

    /// Learned words, when the catalog turns them on; `nil`: every choice is uniform.
    package let learning: CopyLearning?
    static let learningKey = "learning"

    /// The catalog's `learning` section: `held_out_percent` (0–100, default 10) and `seed` (a whole number ≥ 0,
    /// default 0); every problem goes to `problems`.
    static func learning(_ value: JSONValue, problems: inout [String]) -> CopyLearning? {
        guard case .object(let members) = value else {
            problems.append("learning: expected an object {\"held_out_percent\": 10, \"seed\": 0}")
            return nil
        }
        var heldOut = CopyLearning.defaultHeldOutPercent
        var seed: UInt64 = 0
        for (key, member) in members {
            switch (key, member) {
            case ("held_out_percent", .number(let text)):
                guard let number = Int(text), (0...100).contains(number) else {
                    problems.append("learning.held_out_percent: \(text) is not a whole number within 0…100")
                    continue
                }
                heldOut = number
            case ("seed", .number(let text)):
                guard let number = UInt64(text) else {
                    problems.append("learning.seed: \(text) is not a whole number ≥ 0")
                    continue
                }
                seed = number
            case ("held_out_percent", _), ("seed", _):
                problems.append("learning.\(key): expected a number")
            default:
                problems.append("learning.\(key): unknown setting (known: held_out_percent, seed)")
            }
        }
        return CopyLearning(heldOutPercent: heldOut, seed: seed)
    }

    /// kind → lower-cased locale → messages
    private let messages: [CopyKind: [String: (tag: String, list: [CopyMessage])]]
    /// kind → which of its locales serves a user's locale
    private let matchers: [CopyKind: LocaleMatcher]

    /// The catalog compiled into the binary (`default-copy-catalog.json`, embedded by the package manager).
    package static let builtIn: CopyCatalog = {
        do {
            return try CopyCatalog(json: Data(defaultCopyCatalogJSON.utf8), source: "built-in catalog")
        } catch {
            preconditionFailure("the built-in copy catalog is invalid: \(error)")
        }
    }()

    /// The built-in catalog's last-reminder words, which a catalog without its own takes.
    static let builtInLastReminder: [String: (tag: String, list: [CopyMessage])]? = {
        guard
            let raw = try? JSONDecoder().decode(
                [String: [String: [CopyMessage]]].self, from: Data(defaultCopyCatalogJSON.utf8)),
            let section = raw[CopyKind.diaryReminderLast.rawValue]
        else { return nil }
        return Dictionary(uniqueKeysWithValues: section.map { ($0.key.lowercased(), (tag: $0.key, list: $0.value)) })
    }()

    /// Loads and validates a catalog file.
    package static func load(path: String) throws(JobError) -> CopyCatalog {
        try CopyCatalog(json: readInputFile(path, what: "the copy catalog at"), source: path)
    }

    package init(json: Data, source: String) throws(JobError) {
        // Strict first: the byte of a syntax error, and a key given twice (which the decoder would settle by
        // keeping one without a word).
        let parsed = try JSONValue.strict(json, what: source)
        var problems: [String] = []
        // `"learning": {"held_out_percent": 10, "seed": 1}` turns learned words on (``CopyLearning``).
        var learning: CopyLearning?
        var words = json
        if case .object(let members) = parsed, let section = members.first(where: { $0.key == Self.learningKey }) {
            learning = Self.learning(section.value, problems: &problems)
            let rest = (try? JSONSerialization.jsonObject(with: json)) as? [String: Any] ?? [:]
            words =
                (try? JSONSerialization.data(withJSONObject: rest.filter { $0.key != Self.learningKey }))
                ?? Data("{}".utf8)
        }
        let raw: [String: [String: [CopyMessage]]]
        do {
            raw = try JSONDecoder().decode([String: [String: [CopyMessage]]].self, from: words)
        } catch {
            throw .dataError(
                "\(source): not a copy catalog (expected {type: {locale: [{title, body}]}}): \(JSONLine.problem(error))"
            )
        }
        var table: [CopyKind: [String: (tag: String, list: [CopyMessage])]] = [:]
        for (typeName, locales) in raw.sorted(by: { $0.key < $1.key }) {
            guard let kind = CopyKind(rawValue: typeName) else {
                problems.append(
                    "\(typeName): unknown notification type (known: \(CopyKind.allCases.map(\.rawValue).joined(separator: ", ")))"
                )
                continue
            }
            let type = kind.type
            for (tag, list) in locales.sorted(by: { $0.key < $1.key }) {
                let path = "\(typeName).\(tag)"
                if !Self.isLocaleTag(tag) { problems.append("\(path): not a BCP 47 locale tag") }
                if list.isEmpty { problems.append("\(path): no messages") }
                if kind == .diaryReminder && list.count == 1 {
                    problems.append("\(path): needs at least 2 messages so that consecutive days differ")
                }
                for (i, message) in list.enumerated() {
                    problems += Self.problems(in: message, at: "\(path)[\(i)]", type: type)
                }
                if table[kind]?[tag.lowercased()] != nil { problems.append("\(path): locale listed twice") }
                table[kind, default: [:]][tag.lowercased()] = (tag, list)
            }
        }
        // A catalog written before the last reminder existed keeps working: it takes the built-in words for it.
        if table[.diaryReminderLast] == nil, let builtIn = Self.builtInLastReminder {
            table[.diaryReminderLast] = builtIn
        }
        for kind in CopyKind.allCases where table[kind]?[Self.fallbackLocale] == nil {
            problems.append("\(kind.rawValue).\(Self.fallbackLocale): missing (every type needs the fallback locale)")
        }
        guard problems.isEmpty else {
            // One problem a line: a key from the file stays on its problem's line.
            throw .dataError(
                "\(source): invalid copy catalog:\n  "
                    + problems.map(LineText.escapingControls).joined(separator: "\n  "))
        }
        self.messages = table
        self.learning = learning
        self.matchers = table.mapValues { LocaleMatcher(tags: $0.values.map(\.tag), fallback: Self.fallbackLocale) }
    }

    /// The catalog locale used for a user's locale (``LocaleMatcher``): the tag itself and its shorter forms
    /// (`zh-Hant-TW` → `zh-Hant`), then the same language and script as CLDR names them (`zh_TW` → `zh-Hant`,
    /// `iw` → `he`, `es-MX` → `es-419`), then the language, then `en`. Case and `_`/`-` are ignored.
    // A `CopyKind` names the last reminder's words too; the `NotificationType` form wins for the others.
    @_disfavoredOverload
    package func resolveLocale(_ locale: String, for kind: CopyKind) -> String {
        matchers[kind]?.resolve(locale) ?? Self.fallbackLocale
    }

    package func resolveLocale(_ locale: String, for type: NotificationType) -> String {
        resolveLocale(locale, for: CopyKind(type))
    }

    /// The readers a type's words miss: of `locales` (a locale as users have it, and how many users), those
    /// served the fallback locale though they read another language, summed by the language (and script) their
    /// locale names (`pl_PL` and `pl` are `pl`, `zh_TW` is `zh-Hant`), most readers first. A locale that names no
    /// language (`C`) counts as written.
    package func readersWithoutWords(_ locales: [(locale: String, users: Int)], for type: NotificationType)
        -> [(language: String, users: Int)]
    {
        var users: [String: Int] = [:]
        for (locale, count) in locales {
            if let language = languageWithoutWords(locale, for: type) { users[language, default: 0] += count }
        }
        return users.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { ($0.key, $0.value) }
    }

    /// The language (and script) `locale` names when this catalog serves it the fallback locale's words though it
    /// reads another language (`pl` for `pl_PL`, `zh-Hant` for `zh_TW`; a locale that names no language, as
    /// written); nil when its words are there.
    package func languageWithoutWords(_ locale: String, for type: NotificationType) -> String? {
        languageWithoutWords(locale, for: CopyKind(type))
    }

    // A `CopyKind` names the last reminder's words too; the `NotificationType` form wins for the others.
    @_disfavoredOverload
    package func languageWithoutWords(_ locale: String, for kind: CopyKind) -> String? {
        guard resolveLocale(locale, for: kind) == Self.fallbackLocale else { return nil }
        guard let key = LocaleKey(locale) else { return locale }
        guard key.language != Self.fallbackLanguage else { return nil }
        return [key.language, key.script].compactMap { $0 }.joined(separator: "-")
    }

    /// Each language that one type has words for and another does not, as a note for the catalog's author: valid,
    /// but that type's readers of it get the fallback locale's words. By type, then language. The last reminder's
    /// languages are compared with the others', not the other way round: a catalog without its own takes the
    /// built-in one's.
    package var coverageNotes: [String] {
        CopyKind.allCases.flatMap { type in
            var others: [String: [CopyKind]] = [:]
            for other in CopyKind.allCases where other != type && other != .diaryReminderLast {
                for tag in messages[other]?.values.map(\.tag) ?? [] {
                    guard let language = languageWithoutWords(tag, for: type) else { continue }
                    if others[language]?.last != other { others[language, default: []].append(other) }
                }
            }
            return others.sorted { $0.key < $1.key }.map { language, types in
                let names = types.map(\.rawValue).joined(separator: " and ")
                return
                    "\(type.rawValue) has no \(language) words, which \(names) \(types.count == 1 ? "has" : "have"): its \(language) readers get \(Self.fallbackLocale)"
            }
        }
    }

    /// The messages for a catalog locale (as returned by ``resolveLocale(_:for:)``).
    // A `CopyKind` names the last reminder's words too; the `NotificationType` form wins for the others.
    @_disfavoredOverload
    package func messages(for kind: CopyKind, locale: String) -> [CopyMessage] {
        messages[kind]?[locale.lowercased()]?.list ?? []
    }

    package func messages(for type: NotificationType, locale: String) -> [CopyMessage] {
        messages(for: CopyKind(type), locale: locale)
    }

    /// Chooses the message for one user and period: stable for the same user and period (a retried or
    /// taken-over claim shows the same words), spread evenly, and never the index sent last time.
    package func choose(
        _ type: NotificationType, locale: String, userID: String, period: String,
        previousIndex: Int?
    ) -> CopyChoice {
        choose(CopyKind(type), locale: locale, userID: userID, period: period, previousIndex: previousIndex)
    }

    /// The reminder's words with learning (``CopyLearning``) when this catalog turns it on and `learned` is given:
    /// a held-out user and day, or a catalog that does not learn, gets the uniform choice.
    package func choose(
        _ type: NotificationType, locale: String, userID: String, period: String, previousIndex: Int?,
        learned: LearnedWords?
    ) -> CopyChoice {
        let uniform = choose(type, locale: locale, userID: userID, period: period, previousIndex: previousIndex)
        guard type == .diaryReminder, let learning, let learned,
            !learning.isHeldOut(userID: userID, period: period)
        else { return uniform }
        let list = messages(for: type, locale: uniform.locale)
        let index = learning.choose(
            count: list.count, outcomes: learned.outcomes[uniform.locale.lowercased()] ?? [:],
            previous: list.indices.contains(previousIndex ?? -1) ? previousIndex : nil,
            recent: learned.recent(before: period), userID: userID, period: period)
        return CopyChoice(locale: uniform.locale, index: index, message: list[index])
    }

    // A `CopyKind` names the last reminder's words too; the `NotificationType` form wins for the others.
    @_disfavoredOverload
    package func choose(
        _ kind: CopyKind, locale: String, userID: String, period: String,
        previousIndex: Int?
    ) -> CopyChoice {
        let tag = resolveLocale(locale, for: kind)
        let list = messages(for: kind, locale: tag)
        let hash = StableHash.fnv1a("\(userID)|\(period)")
        var index: Int
        if let previous = previousIndex, list.indices.contains(previous), list.count > 1 {
            index = Int(hash % UInt64(list.count - 1))
            if index >= previous { index += 1 }
        } else {
            index = Int(hash % UInt64(list.count))
        }
        return CopyChoice(locale: tag, index: index, message: list[index])
    }

    /// The message recorded in a claim, when it still exists in this catalog.
    package func message(_ type: NotificationType, locale: String, index: Int) -> CopyMessage? {
        message(CopyKind(type), locale: locale, index: index)
    }

    // A `CopyKind` names the last reminder's words too; the `NotificationType` form wins for the others.
    @_disfavoredOverload
    package func message(_ kind: CopyKind, locale: String, index: Int) -> CopyMessage? {
        let list = messages(for: kind, locale: locale)
        return list.indices.contains(index) ? list[index] : nil
    }

    /// The words a run sends for a claim that recorded message `index` in `locale`: that message, or, when this
    /// catalog no longer has it, the catalog's choice for the claim's user, period and locale, with no previous words.
    package func recordedMessage(_ kind: CopyKind, locale: String, index: Int, userID: String, period: String)
        -> CopyMessage
    {
        message(kind, locale: locale, index: index)
            ?? choose(kind, locale: locale, userID: userID, period: period, previousIndex: nil).message
    }

    static func problems(in message: CopyMessage, at path: String, type: NotificationType) -> [String] {
        var problems: [String] = []
        let allowed = type.allowedPlaceholders
        var used: Set<String> = []
        for (field, text, limit, byteLimit) in [
            ("title", message.title, maxTitleLength, maxTitleBytes),
            ("body", message.body, maxBodyLength, maxBodyBytes),
        ] {
            let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.isEmpty { problems.append("\(path).\(field): empty") }
            if text.count > limit { problems.append("\(path).\(field): \(text.count) characters, at most \(limit)") }
            if text.utf8.count > byteLimit {
                problems.append("\(path).\(field): \(text.utf8.count) bytes in UTF-8, at most \(byteLimit)")
            }
            let scan = scanPlaceholders(in: text)
            for problem in scan.problems { problems.append("\(path).\(field): \(problem)") }
            for name in scan.names where !allowed.contains(name) {
                problems.append(
                    "\(path).\(field): unknown placeholder {\(name)}"
                        + (allowed.isEmpty
                            ? " (this type takes none)"
                            : " (allowed: \(allowed.sorted().map { "{\($0)}" }.joined(separator: ", ")))"))
            }
            used.formUnion(scan.names)
        }
        for requirement in type.requiredPlaceholders where used.isDisjoint(with: requirement) {
            problems.append(
                "\(path): needs " + requirement.map { "{\($0)}" }.joined(separator: " or ")
                    + " (a \(type.rawValue) message without it reads wrong)")
        }
        return problems
    }

    /// The placeholder names in a text, and every brace that is not part of a `{name}` pair: copy has no
    /// escape for a literal brace, so a stray one is always a mistake (`{used{used`, `used}`).
    static func scanPlaceholders(in text: String) -> (names: [String], problems: [String]) {
        var names: [String] = []
        var problems: [String] = []
        // Scalars, not characters: a brace followed by a combining mark is still a brace to the renderer.
        let scalars = text.unicodeScalars
        var open: String.UnicodeScalarView.Index?
        var index = scalars.startIndex
        while index < scalars.endIndex {
            let character = scalars[index]
            if character == "{" {
                if open != nil { problems.append("unbalanced '{' (a '{' inside a placeholder)") }
                open = index
            } else if character == "}" {
                if let start = open {
                    let name = String(scalars[scalars.index(after: start)..<index])
                    if name.isEmpty { problems.append("empty placeholder {}") } else { names.append(name) }
                    open = nil
                } else {
                    problems.append("unbalanced '}' (no '{' before it)")
                }
            }
            index = scalars.index(after: index)
        }
        if open != nil { problems.append("unbalanced '{' (no '}' after it)") }
        return (names, problems)
    }

    static func isLocaleTag(_ tag: String) -> Bool {
        let parts = tag.split(separator: "-", omittingEmptySubsequences: false)
        guard let first = parts.first, LocaleKey.isLanguage(first) else { return false }
        return parts.dropFirst().allSatisfy {
            (1...8).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
        }
    }
}

extension CopyCatalog {
    /// The JSON text of the built-in catalog: `default-copy-catalog.json`, as it is (it ends with a newline).
    package static var builtInJSON: String { defaultCopyCatalogJSON }
}
