import Foundation
import JobKitTestSupport
import Testing

@testable import JobKit

@Suite struct CopyCatalogTests {
    let catalog = CopyCatalog.builtIn

    @Test func theBuiltInCatalogHasEnoughWordsEverywhere() {
        for locale in ["en", "ja", "de", "fr", "es", "pt", "pt-BR", "ko"] {
            #expect(catalog.messages(for: .diaryReminder, locale: locale).count >= 3, "\(locale)")
            #expect(!catalog.messages(for: .contentLimit90, locale: locale).isEmpty, "\(locale)")
            #expect(!catalog.messages(for: .contentLimit100, locale: locale).isEmpty, "\(locale)")
        }
    }

    /// The catalog in the binaries is the JSON file translators edit, byte for byte (embedded at build time).
    @Test func theBuiltInCatalogIsTheJSONFileInTheSources() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/JobKit/Copy/default-copy-catalog.json")
        #expect(CopyCatalog.builtInJSON == (try String(contentsOf: file, encoding: .utf8)))
    }

    @Test(arguments: [
        ("pt-BR", "pt-BR"), ("pt-PT", "pt"), ("pt", "pt"), ("PT_br", "pt-BR"), ("ja-JP", "ja"),
        ("zh-Hant-TW", "en"), ("", "en"), ("sw", "en"), ("en-GB", "en"),
    ])
    func localesFallBackFromSpecificToGeneralToEnglish(requested: String, resolved: String) {
        #expect(catalog.resolveLocale(requested, for: .diaryReminder) == resolved)
    }

    /// A catalog with the given locales, two reminder messages each, and `en` for every type.
    static func catalog(locales: [String]) throws -> CopyCatalog {
        func list(_ tag: String) -> String {
            "[{\"title\": \"\(tag) 1\", \"body\": \"b\"}, {\"title\": \"\(tag) 2\", \"body\": \"b\"}]"
        }
        let reminder = (["en"] + locales).map { "\"\($0)\": \(list($0))" }.joined(separator: ", ")
        let warning = "{\"en\": [{\"title\": \"t\", \"body\": \"{used} of {limit}\"}]}"
        let json = """
            {"diary_reminder": {\(reminder)}, "content_limit_90": \(warning), "content_limit_100": \(warning)}
            """
        return try CopyCatalog(json: Data(json.utf8), source: "test catalog")
    }

    /// What the app sends is what the phone calls its locale: Android's `Locale.toString()` (`iw_IL`, `in_ID`,
    /// `zh_TW`), iOS's identifiers (`zh-Hant-TW`, `es-419`), a server's POSIX locale (`de_DE.UTF-8`). Each finds
    /// the catalog's words in its language and script, as CLDR's matching would: legacy codes are the same
    /// language, Taiwan and Hong Kong write Traditional Chinese, Mexico reads Latin American Spanish.
    @Test(arguments: [
        ("iw", "he"), ("iw_IL", "he"), ("he-IL", "he"), ("in-ID", "id"), ("no-NO", "nb"), ("tl-PH", "fil"),
        ("zh-TW", "zh-Hant"), ("zh_HK", "zh-Hant"), ("zh-MO", "zh-Hant"), ("zh-Hant-TW", "zh-Hant"),
        ("zh-CN", "zh-Hans"), ("zh", "zh-Hans"), ("zh-SG", "zh-Hans"), ("zh-Hans-CN", "zh-Hans"),
        ("sr-RS", "sr"), ("sr-ME", "sr-Latn"), ("sh", "sr-Latn"), ("sr-Latn-RS", "sr-Latn"),
        ("es-MX", "es-419"), ("es_AR", "es-419"), ("es-419", "es-419"), ("es-ES", "es"), ("es", "es"),
        ("de_DE.UTF-8", "de"), ("de_AT@euro", "de"), ("de-CH-1996", "de"),
        ("sw", "en"), ("", "en"), ("en-US", "en"), ("C", "en"), ("zh-", "zh-Hans"),
    ])
    func aPhonesLocaleFindsItsLanguageAndScript(requested: String, resolved: String) throws {
        let catalog = try Self.catalog(locales: [
            "de", "he", "id", "nb", "fil", "sr", "sr-Latn", "zh-Hans", "zh-Hant", "es", "es-419",
        ])
        #expect(catalog.resolveLocale(requested, for: .diaryReminder) == resolved)
        // The choice uses it, and says so.
        let choice = catalog.choose(.diaryReminder, locale: requested, userID: "u", period: "p", previousIndex: nil)
        #expect(choice.locale == resolved)
        #expect(choice.message.title.hasPrefix("\(resolved) "))
    }

    /// The same, the other way round: the catalog names the legacy code or a region, the phone the modern code
    /// or a script.
    @Test(arguments: [
        ("he", "iw"), ("nb-NO", "no"), ("zh-Hant-TW", "zh-TW"), ("zh-Hant", "zh-TW"), ("zh-Hant-MO", "zh-HK"),
        ("zh-MO", "zh-HK"), ("zh-HK", "zh-HK"), ("zh-Hans", "zh-CN"), ("zh", "zh-CN"), ("zh-SG", "zh-CN"),
        ("pt-AO", "pt-PT"), ("pt-MZ", "pt-PT"), ("pt-BR", "pt"), ("pt", "pt"), ("de-AT", "de-DE"), ("de", "de-DE"),
    ])
    func aCatalogsRegionalLocalesServeTheirLanguage(requested: String, resolved: String) throws {
        let catalog = try Self.catalog(locales: ["iw", "no", "zh-CN", "zh-TW", "zh-HK", "pt", "pt-PT", "de-DE"])
        #expect(catalog.resolveLocale(requested, for: .diaryReminder) == resolved)
    }

    /// English outside the United States reads as a catalog's `en-GB` writes it, as CLDR's parent `en-001` (and
    /// iOS) would have it: `en-AU`, `en-IN` and `en-DE` got the catalog's American `en`. A regional catalog locale
    /// serves the other children of its CLDR parent, after a catalog locale that is the parent itself.
    @Test(arguments: [
        ("en-AU", "en-GB"), ("en_IN", "en-GB"), ("en-NZ", "en-GB"), ("en-CA", "en-GB"), ("en-DE", "en-GB"),
        ("en-150", "en-GB"), ("en-001", "en-GB"), ("en-GB", "en-GB"), ("en-IE", "en-IE"), ("en-US", "en"),
        ("en", "en"), ("en-PR", "en"), ("en_US.UTF-8", "en"), ("es-AR", "es-MX"), ("es-419", "es-MX"),
        ("es-ES", "es"), ("pt-AO", "pt-MZ"), ("pt-PT", "pt-MZ"), ("pt-BR", "pt"),
    ])
    func aRegionalLocaleServesItsCLDRParentsOtherChildren(requested: String, resolved: String) throws {
        let catalog = try Self.catalog(locales: ["en-IE", "en-GB", "es", "es-MX", "pt", "pt-MZ"])
        #expect(catalog.resolveLocale(requested, for: .diaryReminder) == resolved)
    }

    /// Under a CLDR parent, the catalog's locale that is the parent comes first, then a paradigm locale (`en-GB`),
    /// then another child.
    @Test func theParentOrAParadigmLocaleComesBeforeAnotherChild() throws {
        let withParent = try Self.catalog(locales: ["en-AU", "en-001", "es-AR", "es-419"])
        #expect(withParent.resolveLocale("en-NZ", for: .diaryReminder) == "en-001")
        #expect(withParent.resolveLocale("es-CL", for: .diaryReminder) == "es-419")
        let australianAndBritish = try Self.catalog(locales: ["en-AU", "en-GB"])
        #expect(australianAndBritish.resolveLocale("en-NZ", for: .diaryReminder) == "en-GB")
    }

    /// A reader of one script gets another's words only where the catalog names the language alone, as before.
    @Test func aScriptIsCrossedOnlyToTheLanguageAlone() throws {
        let scripts = try Self.catalog(locales: ["zh-Hans", "sr-Latn"])
        for locale in ["zh-TW", "zh-Hant", "zh_HK", "sr-RS", "sr-Cyrl"] {
            #expect(scripts.resolveLocale(locale, for: .diaryReminder) == "en", "\(locale)")
        }
        let languages = try Self.catalog(locales: ["zh", "sr"])
        #expect(languages.resolveLocale("zh-Hant-TW", for: .diaryReminder) == "zh")
        #expect(languages.resolveLocale("zh_TW", for: .diaryReminder) == "zh")
        #expect(languages.resolveLocale("sr-Latn", for: .diaryReminder) == "sr")
    }

    /// Generated locales (subtags, separators, POSIX suffixes, stray bytes; seeded, repeatable): the answer is
    /// always one of the catalog's locales, the same from a catalog that has answered thousands before as from a
    /// new one, and, for ASCII text, the same whatever the case and whichever separator.
    @Test func anyTextGetsOneOfTheCatalogsLocales() throws {
        let tags = ["de", "he", "nb", "sr", "sr-Latn", "zh-Hans", "zh-Hant", "zh-HK", "es-419", "pt-PT", "de-CH"]
        let used = try Self.catalog(locales: tags)
        var random = SplitMix64(seed: 2026_11_26)
        let pieces = [
            "zh", "ZH", "Hant", "hans", "TW", "hk", "mo", "sr", "Latn", "ME", "iw", "no", "es", "419", "MX", "pt",
            "AO", "de", "CH", "1996", "x", "u", "ca", "", "abcd", "12", "e", "é", "中文", ".UTF-8", "@euro", " ",
        ]
        for _ in 0..<5_000 {
            var text = ""
            for i in 0..<Int.random(in: 1...5, using: &random) {
                if i > 0 { text += ["-", "_", "-", "--", "."].randomElement(using: &random)! }
                text += pieces.randomElement(using: &random)!
            }
            let answer = used.resolveLocale(text, for: .diaryReminder)
            #expect((["en"] + tags).contains(answer), "\(text)")
            #expect(LocaleMatcher(tags: ["en"] + tags, fallback: "en").resolve(text) == answer, "\(text)")
            if text.allSatisfy(\.isASCII) {
                let variant = String(
                    text.enumerated().map { i, c in
                        c == "-" ? "_" : c == "_" ? "-" : i.isMultiple(of: 2) ? Character(c.uppercased()) : c
                    })
                #expect(used.resolveLocale(variant, for: .diaryReminder) == answer, "\(text) / \(variant)")
            }
        }
    }

    /// A server's POSIX locale: the charset is left out, and glibc's script modifiers name the script
    /// (`sr_RS@latin` got the Cyrillic `sr-Cyrl`, as `sr-RS` does).
    @Test(arguments: [
        ("de_DE.UTF-8", "de"), ("ca_ES.UTF-8@valencia", "ca"), ("sr_RS@latin", "sr-Latn"), ("sr_RS", "sr-Cyrl"),
        ("sr_RS.UTF-8@latin", "sr-Latn"), ("sr_ME@cyrillic", "sr-Cyrl"), ("sr_ME", "sr-Latn"),
        ("uz_UZ@cyrillic", "uz-Cyrl"), ("sd_IN@devanagari", "sd-Deva"), ("sd_IN@euro", "sd"),
    ])
    func aPOSIXLocaleIsReadAsGlibcWritesIt(requested: String, resolved: String) throws {
        let catalog = try Self.catalog(locales: ["de", "ca", "sr-Cyrl", "sr-Latn", "uz-Cyrl", "sd", "sd-Deva"])
        #expect(catalog.resolveLocale(requested, for: .diaryReminder) == resolved)
    }

    /// `pushctl user set --locale` takes a locale as a phone or a server writes it: `de_DE.UTF-8` and
    /// `sr_RS@latin` were refused as "not a BCP 47 locale", though the job reads them.
    @Test func aUsersLocaleMayBeWrittenAsAPhoneOrAServerWritesIt() {
        for locale in [
            "ja", "pt-BR", "pt_BR", "zh-Hant-TW", "zh_TW", "es-419", "iw_IL", "de_DE.UTF-8", "sr_RS@latin",
            "ca_ES.UTF-8@valencia", "de_DE@euro",
        ] {
            #expect(UserProfile.isLocale(locale), "\(locale)")
            #expect(LocaleKey(locale) != nil, "\(locale)")
        }
        for locale in ["", "en US", "english!", "e", ".UTF-8", "@latin", "de__DE", "de-DE-", "中文", "de_DE UTF-8"] {
            #expect(!UserProfile.isLocale(locale), "\(locale)")
        }
    }

    /// The readers a catalog's words miss, for the report: those sent the fallback's words though they read
    /// another language, by the language and script their locale names.
    @Test func theReadersACatalogMissesAreCountedByLanguage() throws {
        let catalog = try Self.catalog(locales: ["de", "zh-Hans"])
        let missed = catalog.readersWithoutWords(
            [
                ("zh_TW", 3), ("zh-CN", 5), ("pl", 2), ("pl_PL.UTF-8", 1), ("en-GB", 9), ("EN_us", 1), ("de-AT", 4),
                ("C", 1), ("sr_RS@latin", 2), ("iw", 1), ("he-IL", 1),
            ], for: .diaryReminder)
        #expect(
            missed.map { "\($0.language) \($0.users)" } == ["pl 3", "zh-Hant 3", "he 2", "sr-Latn 2", "C 1"])
        #expect(catalog.readersWithoutWords([("de", 1), ("en", 1)], for: .diaryReminder).isEmpty)
        // Per type: the warnings of this catalog are in English alone.
        #expect(catalog.readersWithoutWords([("de", 4)], for: .contentLimit90).map(\.users) == [4])
    }

    /// A language that one type has and another lacks is valid: its readers get the fallback's words for that type.
    /// It is more likely a translation not yet done, and `pushctl copy check` said only "valid": it now names each.
    @Test func aLanguageOneTypeHasAndAnotherLacksIsNamed() throws {
        #expect(CopyCatalog.builtIn.coverageNotes.isEmpty)
        let two = #"[{"title": "a", "body": "b"}, {"title": "c", "body": "d"}]"#
        let warning = #"[{"title": "t", "body": "{used} of {limit}"}]"#
        let json = """
            {"diary_reminder": {"en": \(two), "ko": \(two), "pt-BR": \(two)},
             "content_limit_90": {"en": \(warning), "ko": \(warning), "pt": \(warning), "zh-Hant": \(warning)},
             "content_limit_100": {"en": \(warning), "zh-TW": \(warning)}}
            """
        let catalog = try CopyCatalog(json: Data(json.utf8), source: "c.json")
        // `pt` and `pt-BR` serve each other's readers, as `zh-Hant` and `zh-TW` do: no note for them.
        #expect(
            catalog.coverageNotes == [
                "diary_reminder has no zh-Hant words, which content_limit_90 and content_limit_100 have: its zh-Hant readers get en",
                // This catalog has no last reminder of its own: it takes the built-in one's, which lacks zh-Hant.
                "diary_reminder_last has no zh-Hant words, which content_limit_90 and content_limit_100 have: its zh-Hant readers get en",
                "content_limit_100 has no ko words, which diary_reminder and content_limit_90 have: its ko readers get en",
                "content_limit_100 has no pt words, which diary_reminder and content_limit_90 have: its pt readers get en",
            ])
    }

    /// Answers are remembered for the locales a run meets, up to a cap; thousands of different strings, past
    /// the cap, change no answer.
    @Test func manyDifferentLocalesDoNotChangeTheAnswers() throws {
        let catalog = try Self.catalog(locales: ["zh-Hant", "zh-Hans"])
        for i in 0..<3_000 {
            #expect(catalog.resolveLocale("x\(i)-TW", for: .diaryReminder) == "en")
            #expect(
                catalog.resolveLocale(i.isMultiple(of: 2) ? "zh_TW" : "zh-CN", for: .diaryReminder)
                    == (i.isMultiple(of: 2) ? "zh-Hant" : "zh-Hans"))
        }
    }

    @Test func theChoiceIsStableAndNeverThePreviousOne() {
        for i in 0..<500 {
            let user = "user-\(i)"
            let first = catalog.choose(
                .diaryReminder, locale: "en", userID: user, period: "2026-11-21", previousIndex: nil)
            let again = catalog.choose(
                .diaryReminder, locale: "en", userID: user, period: "2026-11-21", previousIndex: nil)
            #expect(first == again)
            let next = catalog.choose(
                .diaryReminder, locale: "en", userID: user, period: "2026-11-22", previousIndex: first.index)
            #expect(next.index != first.index)
        }
        // Spread: every message gets used.
        let used = Set(
            (0..<200).map {
                catalog.choose(.diaryReminder, locale: "ja", userID: "u\($0)", period: "p", previousIndex: nil).index
            })
        #expect(used.count == catalog.messages(for: .diaryReminder, locale: "ja").count)
    }

    @Test func placeholdersAreFilled() {
        let message = catalog.choose(.contentLimit90, locale: "en", userID: "u", period: "2026-11", previousIndex: nil)
            .message.rendered(["used": "27", "limit": "30", "percent": "90"])
        #expect(message.body.contains("27 of your 30"))
        #expect(!message.body.contains("{"))
    }

    @Test func everyProblemOfABadCatalogIsReportedAtOnce() {
        let json = """
            {
              "diary_reminder": {"ja": [{"title": "only one", "body": "b"}], "english!": [{"title": "t", "body": "b"}, {"title": "t", "body": "b"}]},
              "content_limit_90": {"en": [{"title": "\(String(repeating: "x", count: 61))", "body": "{used} of {quota}"}]},
              "content_limit_100": {"en": [{"title": " ", "body": "ok"}]},
              "birthday": {"en": [{"title": "t", "body": "b"}]}
            }
            """
        do {
            _ = try CopyCatalog(json: Data(json.utf8), source: "bad.json")
            Issue.record("a bad catalog loaded")
        } catch {
            #expect(error.exitCode == 65)
            for fragment in [
                "diary_reminder.ja: needs at least 2 messages", "diary_reminder.english!: not a BCP 47",
                "content_limit_90.en[0].title: 61 characters", "unknown placeholder {quota}",
                "content_limit_100.en[0].title: empty", "birthday: unknown notification type",
                "diary_reminder.en: missing",
            ] {
                #expect(error.message.contains(fragment), "missing: \(fragment)")
            }
        }
        #expect(throws: JobError.self) { try CopyCatalog(json: Data("[1, 2]".utf8), source: "x") }
        #expect(
            throws: JobError.noInput("cannot read the copy catalog at /nonexistent/c.json: No such file or directory")
        ) {
            try CopyCatalog.load(path: "/nonexistent/c.json")
        }
    }

    /// A catalog saved by a Windows editor (a UTF-8 byte order mark first) loads as the same catalog without the
    /// mark. Before, it was refused: "invalid JSON at byte 0: expected a value".
    @Test func aCatalogWithAByteOrderMarkLoads() throws {
        let json = Data(CopyCatalog.builtInJSON.utf8)
        let marked = try CopyCatalog(json: Data([0xEF, 0xBB, 0xBF]) + json, source: "c.json")
        for type in NotificationType.allCases {
            #expect(marked.messages(for: type, locale: "ja") == CopyCatalog.builtIn.messages(for: type, locale: "ja"))
        }
        #expect(marked.messages(for: .diaryReminder, locale: "ja").isEmpty == false)
    }

    /// A catalog that is not one says where: a syntax error by its byte, a key given twice (the decoder kept one of
    /// the two without a word) or a value of the wrong shape by its path. Before, each was "The operation could not
    /// be completed. The data isn't in the correct format.", or no error at all for the key given twice.
    @Test func aMalformedCatalogSaysWhere() {
        let reminders = #"[{"title": "a", "body": "b"}, {"title": "c", "body": "d"}]"#
        let cases: [(json: String, message: String)] = [
            (#"{"diary_reminder": {"en": "#, "c.json: invalid JSON at byte 26: expected a value, found the end"),
            (
                #"{"diary_reminder": {"en": [{"title": "a", "body": "b", "title": "c"}, {"title": "c", "body": "d"}]}}"#,
                "c.json: diary_reminder.en[0].title appears twice"
            ),
            (
                #"{"diary_reminder": {"en": \#(reminders)}, "diary_reminder": {"ja": \#(reminders)}}"#,
                "c.json: diary_reminder appears twice"
            ),
            (
                #"{"diary_reminder": {"en": {"title": "a", "body": "b"}}}"#,
                "c.json: not a copy catalog (expected {type: {locale: [{title, body}]}}): diary_reminder.en: expected an array"
            ),
            (
                #"{"diary_reminder": {"en": [{"title": "a"}, {"title": "c", "body": "d"}]}}"#,
                "c.json: not a copy catalog (expected {type: {locale: [{title, body}]}}): diary_reminder.en[0]: missing body"
            ),
        ]
        for (json, message) in cases {
            #expect(throws: JobError.dataError(message), "\(json)") {
                try CopyCatalog(json: Data(json.utf8), source: "c.json")
            }
        }
    }

    /// Issue 21, item 4: copy that loses its numbers or shows a literal brace is refused, and so is a title
    /// whose bytes (not characters) exceed the bound; every problem at once.
    @Test func copyThatWouldRenderWrongIsRefused() {
        let reminders = #"{"en": [{"title": "a", "body": "b"}, {"title": "c", "body": "d"}]}"#
        let heavyTitle = String(repeating: "e" + String(repeating: "\u{0301}", count: 150), count: 60)
        let json = """
            {
              "diary_reminder": \(reminders),
              "content_limit_90": {
                "en": [{"title": "Close", "body": "You have used {used} of your entries"}],
                "es": [{"title": "Cerca", "body": "Has usado {used{used de {limit}"}],
                "fr": [{"title": "Presque", "body": "{percent} % de {limit}}"}],
                "de": [{"title": "\(heavyTitle)", "body": "{used} von {limit}"}]
              },
              "content_limit_100": {"en": [{"title": "Full", "body": "Has usado las entradas del plan gratuito."}]}
            }
            """
        do {
            _ = try CopyCatalog(json: Data(json.utf8), source: "bad.json")
            Issue.record("a catalog that renders wrong loaded")
        } catch {
            #expect(error.exitCode == 65)
            for fragment in [
                "content_limit_90.en[0]: needs {limit}",
                "content_limit_90.es[0].body: unbalanced '{'",
                "content_limit_90.fr[0].body: unbalanced '}'",
                "content_limit_90.de[0].title: 18060 bytes in UTF-8, at most 256",
                "content_limit_100.en[0]: needs {limit}",
            ] {
                #expect(error.message.contains(fragment), "missing: \(fragment) in \(error.message)")
            }
            #expect(!error.message.contains("content_limit_90.fr[0]: needs"), "{percent} stands for {used}")
        }
        // The built-in catalog meets every rule it enforces.
        #expect(
            CopyCatalog.builtIn.messages(for: .contentLimit100, locale: "es").allSatisfy { $0.body.contains("{limit}") }
        )
    }

    @Test func tokensAreMaskedEverywhereTheyArePrinted() {
        #expect(Redaction.maskToken(String(repeating: "a", count: 64)) == "aaaaaaaa…(64)")
        #expect(Redaction.maskToken("a-phone") == "a-…(7)")
        #expect(Redaction.maskToken("ab") == "…(2)")
    }
}
