import PushCtlCommands

/// `pushctl`: the command tree is the PushCtlCommands library's (so that tests parse and validate it in process).
@main
enum PushCtlMain {
    static func main() async { await PushCtl.main() }
}
