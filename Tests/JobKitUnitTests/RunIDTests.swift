import Foundation
import Testing

@testable import JobKit

@Suite struct RunIDTests {
    /// A run id is a version 4 UUID in lower case, as `UUID().uuidString.lowercased()` wrote them before.
    @Test func aRunIDIsALowerCaseVersion4UUID() {
        var seen: Set<String> = []
        for _ in 0..<1_000 {
            let id = RunID.make()
            #expect(UUID(uuidString: id)?.uuidString.lowercased() == id, "\(id)")
            let scalars = Array(id.unicodeScalars)
            #expect(scalars[14] == "4" && "89ab".unicodeScalars.contains(scalars[19]), "\(id)")
            seen.insert(id)
        }
        #expect(seen.count == 1_000)
    }
}
