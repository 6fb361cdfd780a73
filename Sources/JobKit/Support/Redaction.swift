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

    /// SplitMix64's finalizer over `value`: every output bit depends on every input bit. FNV-1a's high bits
    /// follow its low ones for short, similar ids (`user-1`, `user-2`, …); a second split of the users (one
    /// that must not follow the shard, which is FNV-1a modulo N) is made on the mixed value.
    public static func mixed(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9e37_79b9_7f4a_7c15
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
