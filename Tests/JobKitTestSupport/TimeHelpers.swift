import Foundation
import Testing

@testable import JobKit

package func instant(_ text: String) -> Int64 {
    guard let value = Timestamps.parse(text) else { preconditionFailure("bad instant in test: \(text)") }
    return value
}

package func zone(_ identifier: String) -> ZoneClock {
    guard let clock = ZoneClock(identifier: identifier) else {
        preconditionFailure("unknown zone in test: \(identifier)")
    }
    return clock
}

package func date(_ text: String) -> LocalDate { LocalDate(text)! }
package func time(_ text: String) -> LocalTime { LocalTime(text)! }
