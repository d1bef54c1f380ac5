import Glibc

/// Runs a program to its end, as a terminal would: with this process's standard streams.
public enum Spawn {
    /// `arguments[0]` is the program's path. Returns its exit status, or 128 + the signal that ended it.
    public static func run(_ arguments: [String]) throws(SystemError) -> Int32 {
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, arguments[0], nil, nil, &argv, environ)
        guard rc == 0 else { throw SystemError(operation: "starting \(arguments[0])", code: rc) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { throw SystemError.errno("waiting for \(arguments[0])") }
        }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}
