import Foundation
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
        #expect(message.body.contains("27 of 30"))
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
