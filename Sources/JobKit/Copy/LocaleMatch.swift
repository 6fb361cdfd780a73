import Synchronization

/// A locale tag reduced to what choosing copy needs: the language (legacy codes replaced), the script (given, or
/// the one the language and region imply where that decides what a reader can read), and the region.
///
/// What apps send is whatever the phone calls its locale: iOS identifiers (`zh-Hant-TW`, `es-419`), Android's
/// `Locale.toString()` (`zh_TW`, `iw_IL`, `in_ID`: Java kept the withdrawn ISO 639 codes), or a server's POSIX
/// locale (`de_DE.UTF-8`). The rules here are the few of CLDR's that decide which words a reader gets: its
/// language aliases, its likely scripts for Chinese and Serbian, and its parent locales for Latin American
/// Spanish, European Portuguese and Traditional Chinese.
struct LocaleKey: Hashable {
    let language: String
    let script: String?
    let region: String?

    /// Parses a tag: `_` or `-` between subtags, any case, a POSIX `.charset` ignored, variants and extensions
    /// after the region ignored. A POSIX `@modifier` names the script where glibc's locales use it so (`@latin`,
    /// `@cyrillic`, `@devanagari`: `sr_RS@latin` is Serbian in Latin script); any other (`@euro`, `@valencia`) is
    /// ignored. Nil when it does not start with a 2–3 letter language.
    init?(_ tag: String) {
        let subtags = Self.tagPart(tag).split(omittingEmptySubsequences: false) { $0 == "-" || $0 == "_" }
        guard let first = subtags.first, Self.isLanguage(first) else { return nil }
        var language = first.lowercased()
        var script: String?
        var region: String?
        var rest = subtags.dropFirst()
        if let next = rest.first, next.count == 4, next.allSatisfy(\.isASCIILetter) {
            script = next.prefix(1).uppercased() + next.dropFirst().lowercased()
            rest = rest.dropFirst()
        }
        if let next = rest.first,
            (next.count == 2 && next.allSatisfy(\.isASCIILetter))
                || (next.count == 3 && next.allSatisfy(\.isASCIIDigit))
        {
            region = next.uppercased()
        }
        if script == nil, let at = tag.lastIndex(of: "@") {
            script = Self.modifierScripts[tag[tag.index(after: at)...].lowercased()]
        }
        if let alias = Self.languageAliases[language] {
            language = alias.language
            script = script ?? alias.script
        }
        self.language = language
        self.region = region
        self.script = script ?? Self.likelyScript(language: language, region: region)
    }

    /// The part of a locale string that names the locale: what comes before a POSIX `.charset` or `@modifier`
    /// (`de_DE` of `de_DE.UTF-8`, `sr_RS` of `sr_RS@latin`).
    static func tagPart(_ tag: String) -> Substring {
        tag.prefix { $0 != "." && $0 != "@" }
    }

    /// Whether a subtag is a language: 2–3 ASCII letters (ISO 639-1, or 639-2/3 where there is no 639-1 code).
    static func isLanguage(_ subtag: Substring) -> Bool {
        (2...3).contains(subtag.count) && subtag.allSatisfy(\.isASCIILetter)
    }

    init(language: String, script: String?, region: String?) {
        self.language = language
        self.script = script
        self.region = region
    }

    /// The lower-cased tag with every known part: `zh-hant-tw` for `zh_TW`, `he` for `iw`.
    var canonical: String {
        [language, script, region].compactMap { $0?.lowercased() }.joined(separator: "-")
    }

    /// The language and script only: `zh-hant`, or the language where no script is known.
    var languageAndScript: String {
        [language, script].compactMap { $0?.lowercased() }.joined(separator: "-")
    }

    /// CLDR's parent locale, for the regions whose parent is not the bare language: `es-MX` → `es-419`,
    /// `pt-AO` → `pt-PT`, `zh-Hant-MO` → `zh-Hant-HK`, and English outside the United States: `en-AU` → `en-001`
    /// (international English, as `en-GB` writes it), `en-DE` → `en-150` → `en-001`.
    var parent: LocaleKey? {
        guard let region else { return nil }
        switch language {
        case "en" where Self.europeanEnglishChildren.contains(region):
            return LocaleKey(language: language, script: script, region: "150")
        case "en" where region == "150" || Self.internationalEnglishChildren.contains(region):
            return LocaleKey(language: language, script: script, region: "001")
        case "es" where Self.latinAmericanSpanish.contains(region):
            return LocaleKey(language: language, script: script, region: "419")
        case "pt" where Self.europeanPortugueseChildren.contains(region):
            return LocaleKey(language: language, script: script, region: "PT")
        case "zh" where script == "Hant" && region == "MO":
            return LocaleKey(language: language, script: script, region: "HK")
        default:
            return nil
        }
    }

    /// The script a language is written in where it has more than one in common use, from the region: CLDR's
    /// likely subtags. Nil for every other language (the script does not tell its catalogs apart).
    static func likelyScript(language: String, region: String?) -> String? {
        switch language {
        case "zh": return ["TW", "HK", "MO"].contains(region ?? "") ? "Hant" : "Hans"
        case "sr": return region == "ME" ? "Latn" : "Cyrl"
        default: return nil
        }
    }

    /// The region a language and script is most likely used in (CLDR's likely subtags), for choosing among a
    /// catalog's regional locales: `zh-Hant` → Taiwan.
    static func likelyRegion(language: String, script: String?) -> String? {
        switch (language, script) {
        case ("zh", "Hans"): return "CN"
        case ("zh", "Hant"): return "TW"
        case ("sr", "Cyrl"): return "RS"
        case ("sr", "Latn"): return "RS"
        default: return nil
        }
    }

    /// The language aliases phones still send: Java's `iw`, `in`, `ji` (CLDR's aliases, as are `jw`, `mo`, `tl`
    /// for Filipino and `sh` for Serbian in Latin script); and `no`, which the phones' Norwegian Bokmål (`nb`)
    /// is also called.
    static let languageAliases: [String: (language: String, script: String?)] = [
        "iw": ("he", nil), "in": ("id", nil), "ji": ("yi", nil), "jw": ("jv", nil), "mo": ("ro", nil),
        "no": ("nb", nil), "tl": ("fil", nil), "sh": ("sr", "Latn"),
    ]

    /// The POSIX modifiers that name a script in glibc's locales (`sr_RS@latin`, `uz_UZ@cyrillic`,
    /// `sd_IN@devanagari`).
    static let modifierScripts: [String: String] = ["latin": "Latn", "cyrillic": "Cyrl", "devanagari": "Deva"]

    /// The regions whose English is `en-001` in CLDR's parent locales: every English-speaking region but the
    /// United States and its territories (and the European ones of `en-150`).
    static let internationalEnglishChildren: Set<String> = [
        "AG", "AI", "AU", "BB", "BM", "BS", "BW", "BZ", "CA", "CC", "CK", "CM", "CX", "CY", "DG", "DM", "ER", "FJ",
        "FK", "FM", "GB", "GD", "GG", "GH", "GI", "GM", "GY", "HK", "IE", "IL", "IM", "IN", "IO", "JE", "JM", "KE",
        "KI", "KN", "KY", "LC", "LR", "LS", "MG", "MO", "MS", "MT", "MU", "MV", "MW", "MY", "NA", "NF", "NG", "NR",
        "NU", "NZ", "PG", "PH", "PK", "PN", "PW", "RW", "SB", "SC", "SD", "SG", "SH", "SL", "SS", "SX", "SZ", "TC",
        "TK", "TO", "TT", "TV", "TZ", "UG", "VC", "VG", "VU", "WS", "ZA", "ZM", "ZW",
    ]

    /// The regions whose English is `en-150` (English in Europe) in CLDR's parent locales.
    static let europeanEnglishChildren: Set<String> = ["AT", "BE", "CH", "DE", "DK", "FI", "NL", "SE", "SI"]

    /// CLDR's paradigm locales: of a parent's regional children in a catalog, these serve it first (`en-GB` for
    /// `en-001`).
    static let paradigms: Set<String> = ["en", "en-gb", "es", "es-419", "pt-br", "pt-pt"]

    /// The regions whose Spanish is `es-419` in CLDR's parent locales.
    static let latinAmericanSpanish: Set<String> = [
        "AR", "BO", "BR", "BZ", "CL", "CO", "CR", "CU", "DO", "EC", "GT", "HN", "MX", "NI", "PA", "PE", "PR", "PY",
        "SV", "US", "UY", "VE",
    ]

    /// The regions whose Portuguese is `pt-PT` in CLDR's parent locales.
    static let europeanPortugueseChildren: Set<String> = [
        "AO", "CH", "CV", "FR", "GQ", "GW", "LU", "MO", "MZ", "ST", "TL",
    ]
}

/// Which of a catalog's locales serves a user's locale, for one notification type.
///
/// In order: the tag as written and its shorter forms short of the bare language (`de-CH-1996` → `de-ch`);
/// then, by language and script, the locale itself, its CLDR parent, its language and script, its language. A
/// catalog locale is found by its own tag and by its canonical form (a catalog's `zh-TW` serves `zh-Hant-TW`,
/// its `iw` serves `he`, its `de-DE` serves `de`) and, after any locale that is the parent itself, under its
/// CLDR parents (its `en-GB` serves `en-AU` through `en-001`); where several serve a language and script, the
/// one without a region first, then the likely region's, then the first by tag. A script is crossed only to a
/// catalog locale that names the language alone (`zh-Hant-TW` finds a catalog's `zh`, never its `zh-Hans`).
/// Then the fallback locale.
struct LocaleMatcher: Sendable {
    /// Lower-cased catalog tag → the tag as the catalog writes it.
    private let literal: [String: String]
    /// Canonical forms, languages and scripts, and languages → the catalog tag that serves them best.
    private let canonical: [String: String]
    private let fallback: String
    /// The answers given so far: a run asks for the same few locales for every user it reminds.
    private let memo = Memo()

    init(tags: [String], fallback: String) {
        self.fallback = fallback
        var literal: [String: String] = [:]
        // key → (rank, tag): the lowest rank wins.
        var best: [String: ((Int, Int, String), String)] = [:]
        func offer(_ key: String, _ rank: (Int, Int, String), _ tag: String) {
            if let current = best[key], current.0 <= rank { return }
            best[key] = (rank, tag)
        }
        for tag in tags {
            let lower = tag.lowercased()
            literal[lower] = tag
            guard let key = LocaleKey(tag) else { continue }
            let regionRank =
                key.region == nil
                ? 0 : key.region == LocaleKey.likelyRegion(language: key.language, script: key.script) ? 1 : 2
            offer(key.canonical, (0, 0, lower), tag)
            // Not under the language alone: a reader of one script is not served another's words unless the
            // catalog says only the language (its literal `zh`, as before).
            offer(key.languageAndScript, (1, regionRank, lower), tag)
            // Under its CLDR parents, after any catalog locale that is the parent: a catalog's `en-GB` serves
            // `en-001` and so `en-AU`, its `es-MX` serves `es-419` and so `es-AR`; a paradigm locale first.
            var parent = key.parent
            while let next = parent {
                offer(next.canonical, (2, LocaleKey.paradigms.contains(lower) ? 0 : 1, lower), tag)
                parent = next.parent
            }
        }
        self.literal = literal
        self.canonical = best.mapValues(\.1)
    }

    func resolve(_ locale: String) -> String {
        if let tag = literal[locale] { return tag }
        return memo.answer(for: locale) { match($0) }
    }

    private func match(_ locale: String) -> String {
        // The tag as written, and its shorter forms short of the bare language.
        var subtags = locale.lowercased().split { $0 == "-" || $0 == "_" }
        while subtags.count > 1 {
            if let tag = literal[subtags.joined(separator: "-")] { return tag }
            subtags.removeLast()
        }
        guard let key = LocaleKey(locale) else { return literal[locale.lowercased()] ?? fallback }
        var candidates = [key.canonical]
        var parent = key.parent
        while let next = parent {
            candidates.append(next.canonical)
            parent = next.parent
        }
        candidates += [key.languageAndScript, key.language]
        for candidate in candidates {
            if let tag = literal[candidate] ?? canonical[candidate] { return tag }
        }
        return fallback
    }
}

extension LocaleMatcher {
    /// Answers by locale, up to ``capacity`` of them (a column of arbitrary text must not grow it without end).
    final class Memo: Sendable {
        static let capacity = 1_024
        private let answers = Mutex<[String: String]>([:])

        func answer(for locale: String, _ compute: (String) -> String) -> String {
            if let known = answers.withLock({ $0[locale] }) { return known }
            let answer = compute(locale)
            answers.withLock { if $0.count < Self.capacity { $0[locale] = answer } }
            return answer
        }
    }
}

extension Character {
    var isASCIILetter: Bool { isASCII && isLetter }
    package var isASCIIDigit: Bool { isASCII && isNumber }
}
