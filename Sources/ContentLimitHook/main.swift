import ContentLimitQuietPath

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// `content-limit-hook`: answers a write below 90 % of its quota itself (``QuietPath``, no Foundation, a
// few milliseconds) and hands every other invocation, arguments untouched, to `content-limit-hook-full`
// in the same directory.

var environment: [String: String] = [:]
var entry = environ
while let pointer = entry.pointee {
    let variable = String(cString: pointer)
    if let equals = variable.firstIndex(of: "=") {
        environment[String(variable[..<equals])] = String(variable[variable.index(after: equals)...])
    }
    entry += 1
}

switch QuietPath.answer(arguments: Array(CommandLine.arguments.dropFirst()), environment: environment) {
case .answered(let line):
    print(line)
    exit(0)
case .handOver:
    let full = HandOver.fullHookPath()
    execv(full, CommandLine.unsafeArgv)
    let reason = String(cString: strerror(errno))
    let message = "content-limit-hook: error: cannot run \(full): \(reason) (it ships beside content-limit-hook)\n"
    _ = message.withCString { write(2, $0, strlen($0)) }
    exit(69)  // EX_UNAVAILABLE
}
