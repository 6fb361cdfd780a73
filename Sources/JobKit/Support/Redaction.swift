/// Device tokens are credentials for reaching a person: logs and output show only a short prefix.
public enum Redaction {
    /// `abcd1234…(64)`: the first 8 characters (fewer for a short token: never more than a third)
    /// and the length.
    public static func maskToken(_ token: String) -> String {
        let prefix = token.prefix(min(8, token.count / 3))
        return "\(prefix)…(\(token.count))"
    }
}

/// FNV-1a, 64-bit: a stable hash (unlike `Hasher`, the same in every process) for choosing copy and,
/// later, shards.
public enum StableHash {
    public static func fnv1a(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }
}
