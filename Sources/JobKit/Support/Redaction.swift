/// Device tokens are credentials for reaching a person: logs and output show only a short prefix.
package enum Redaction {
    /// `abcd1234…(64)`: the first 8 characters (fewer for a short token: never more than a third)
    /// and the length.
    package static func maskToken(_ token: String) -> String {
        let prefix = token.prefix(min(8, token.count / 3))
        return "\(prefix)…(\(token.count))"
    }
}

/// FNV-1a, 64-bit: a stable hash (unlike `Hasher`, the same in every process) for choosing copy and,
/// later, shards.
package enum StableHash {
    /// FNV-1a's offset basis: the hash of nothing.
    package static let fnv1aBasis: UInt64 = 0xcbf2_9ce4_8422_2325

    package static func fnv1a(_ text: String) -> UInt64 {
        var hash = fnv1aBasis
        fnv1a(text.utf8, into: &hash)
        return hash
    }

    /// Folds `bytes` into a running FNV-1a `hash`: a hash of several values without joining them first.
    package static func fnv1a(_ bytes: some Sequence<UInt8>, into hash: inout UInt64) {
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
    }

    /// Folds the eight bytes of `word` (least significant first) into a running FNV-1a `hash`.
    package static func fnv1a(word: UInt64, into hash: inout UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) {
            hash ^= (word >> UInt64(shift)) & 0xff
            hash &*= 0x0000_0100_0000_01b3
        }
    }
}
