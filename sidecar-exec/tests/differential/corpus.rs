//! The corpus: command lines a user or an agent types, each run natively and forwarded, and the small scripts
//! they run (written into every case's folder). `python3` is the forwarded command; everything else in a line
//! (`head`, `cat`, `sha256sum`, the shell itself) runs here in both runs.

use nix::sys::signal::Signal;

use super::harness::{Case, Input, Step, BIG_BOUND};

/// The files every case's folder holds.
pub const FILES: &[(&str, &str)] = &[
    ("list.txt", "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\n"),
    ("ready.py", READY),
    ("traps.py", TRAPS),
    ("tstp.py", TSTP),
    ("ticks.py", TICKS),
    ("readline.py", READLINE),
    ("hashin.py", HASHIN),
    ("yes.py", YES),
];

/// The 100 MiB file the big cases read, in the workspace beside the cases' folders (written once per column).
pub const DATA: &str = "data.bin";
pub const DATA_MIB: usize = 100;

/// `from ready import ready`: marks the command ready (its handlers installed) with a file that holds its pid,
/// created whole (written under another name, then renamed).
const READY: &str = r#"import os

def ready(name="ready"):
    with open(name + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(name + ".tmp", name)
"#;

/// `python3 traps.py MODE`: prints `started`, installs the handlers MODE names, says it is ready, and waits on the
/// gate (which the signal cases never release), so only a signal ends it.
const TRAPS: &str = r#"import signal, sys
from ready import ready

def exits(code):
    def handler(number, frame):
        print("caught", signal.Signals(number).name, "- cleaning up, exit", code, flush=True)
        sys.exit(code)
    return handler

seen = []
def twice(number, frame):
    seen.append(number)
    if len(seen) == 1:
        print("first SIGINT: finishing the current step", flush=True)
        ready("ready2")
    else:
        print("second SIGINT: giving up, exit 3", flush=True)
        sys.exit(3)

mode = sys.argv[1]
if mode == "int":
    signal.signal(signal.SIGINT, exits(3))
elif mode == "hup":
    signal.signal(signal.SIGHUP, exits(5))
elif mode == "quit":
    signal.signal(signal.SIGQUIT, exits(6))
elif mode == "int-twice":
    signal.signal(signal.SIGINT, twice)
print("started", mode, flush=True)
ready()
try:
    open("gate").readline()
finally:
    print("finally ran", flush=True)
"#;

/// `python3 tstp.py`: a SIGCONT handler that says so, then reads one line from the gate. Stopped by Ctrl-Z before
/// the harness releases the gate, it prints `continued` before what it read; never stopped, it reads at once.
const TSTP: &str = r#"import signal
from ready import ready
signal.signal(signal.SIGCONT, lambda number, frame: print("continued", flush=True))
print("started", flush=True)
ready()
print("read:", open("gate").readline().strip(), flush=True)
"#;

/// `python3 ticks.py`: alternates stdout and stderr lines, each written only once the harness has seen the one
/// before (the harness acknowledges every line into the gate): progress as it happens, in a deterministic order.
const TICKS: &str = r#"import sys
gate = open("gate")
for i in range(1, 4):
    print("out", i, flush=True)
    gate.readline()
    print("err", i, file=sys.stderr, flush=True)
    gate.readline()
print("done", flush=True)
"#;

/// `python3 readline.py NAME`: reads exactly one line of stdin, a byte at a time (as `read` does), so what it
/// leaves is the next command's.
const READLINE: &str = r#"import os, sys
line = b""
while not line.endswith(b"\n"):
    byte = os.read(0, 1)
    if not byte:
        break
    line += byte
print(sys.argv[1], "then", line.decode().strip() or "(nothing)")
"#;

/// `python3 hashin.py`: the length and SHA-256 of all of stdin, read in 1 MiB pieces.
const HASHIN: &str = r#"import hashlib, sys
digest, length = hashlib.sha256(), 0
for piece in iter(lambda: sys.stdin.buffer.read(1 << 20), b""):
    digest.update(piece)
    length += len(piece)
print(length, digest.hexdigest())
"#;

/// `python3 yes.py [raise]`: `y` forever, a hundred lines a second (paced, so that a forwarded run that does not stop
/// costs no CPU while the harness waits for its bound). It dies of SIGPIPE when its reader goes, as `yes` and most
/// native tools do; with `raise`, as Python does by default: SIGPIPE ignored, BrokenPipeError raised.
const YES: &str = r#"import signal, sys, time
if sys.argv[1:] != ["raise"]:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
while True:
    print("y", flush=True)
    time.sleep(0.01)
"#;

const SIGNALLED: [Step; 2] = [Step::Await("ready"), Step::Signal(Signal::SIGINT)];

/// Every case, in the report's order.
pub const CASES: &[Case] = &[
    // Output, arguments, exit code.
    Case {
        name: "out-err-exit",
        line: r#"python3 -c 'import sys; print("to stdout"); print("to stderr", file=sys.stderr); sys.exit(3)'"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "args-and-cwd",
        line: r#"python3 -c 'import os, sys; print(os.path.basename(os.getcwd()), sys.argv[1:])' 'a b' "it's" '*' '' '$HOME'"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case { name: "empty-output", line: "python3 -c ''", at_a_terminal: true, ..Case::PLAIN },
    Case {
        name: "binary-output",
        line: r#"python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 64); sys.stderr.buffer.write(b"\0\xff\r\n\x1b[31mred")'"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "no-final-newline",
        line: r#"python3 -c 'print("no newline", end="")'"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    // Pipes out of the command.
    Case { name: "pipe-out", line: "python3 -c 'for i in range(100000): print(i)' | tail -n 2", ..Case::PLAIN },
    Case { name: "head-1-sigpipe", line: "python3 yes.py | head -1", ..Case::PLAIN },
    Case { name: "head-1-brokenpipe", line: "python3 yes.py raise | head -1", ..Case::PLAIN },
    Case {
        name: "pipefail",
        line: r#"set -o pipefail; python3 -c 'raise SystemExit(3)' | cat; echo "status $?"; python3 yes.py | head -1; echo "status $?""#,
        ..Case::PLAIN
    },
    Case {
        name: "100-mib-out",
        line: r#"python3 -c 'import shutil, sys; shutil.copyfileobj(open("../data.bin", "rb"), sys.stdout.buffer, 1 << 20)' | sha256sum"#,
        bound: BIG_BOUND,
        ..Case::PLAIN
    },
    // Input into the command.
    Case {
        name: "pipe-in",
        line: "seq 1 1000 | python3 -c 'import sys; print(sum(map(int, sys.stdin)))'",
        ..Case::PLAIN
    },
    Case { name: "script-on-stdin", line: "echo 'print(6 * 7)' | python3 -", ..Case::PLAIN },
    Case {
        name: "heredoc",
        line: "python3 - <<'EOF'\nimport sys\nprint('from a heredoc', sys.argv)\nEOF",
        ..Case::PLAIN
    },
    Case {
        name: "here-string",
        line: r#"python3 -c 'import sys; print(sys.stdin.read().upper(), end="")' <<< 'a here-string'"#,
        ..Case::PLAIN
    },
    Case {
        name: "binary-stdin",
        line: r#"printf '\000\001\376\377' | python3 -c 'import sys; print(sys.stdin.buffer.read().hex())'"#,
        ..Case::PLAIN
    },
    Case {
        name: "file-stdin",
        line: "python3 -c 'import sys; print(sys.stdin.read().split())' < list.txt",
        ..Case::PLAIN
    },
    Case {
        name: "devnull-stdin",
        line: "python3 -c 'import sys; print(repr(sys.stdin.read()))' < /dev/null",
        ..Case::PLAIN
    },
    Case { name: "100-mib-in-pipe", line: "cat ../data.bin | python3 hashin.py", bound: BIG_BOUND, ..Case::PLAIN },
    Case { name: "100-mib-in-file", line: "python3 hashin.py < ../data.bin", bound: BIG_BOUND, ..Case::PLAIN },
    Case {
        name: "slow-writer",
        line: r#"(read -r _ < gate; echo late) | python3 -c 'import sys; open("ready", "w").close(); print("read:", sys.stdin.read(), end="")'"#,
        steps: &[Step::Await("ready"), Step::Release],
        ..Case::PLAIN
    },
    Case {
        name: "unclosed-stdin-unread",
        line: r#"python3 -c 'print("never reads stdin")'"#,
        stdin: Input::Unclosed(b""),
        ..Case::PLAIN
    },
    Case {
        name: "unclosed-stdin-one-line",
        line: r#"python3 -c 'import sys; print("read:", sys.stdin.readline(), end="")'"#,
        stdin: Input::Unclosed(b"one line\n"),
        ..Case::PLAIN
    },
    // Progress and the order of stdout and stderr in one pipe.
    Case {
        name: "interleaved-acked",
        line: "python3 ticks.py",
        merged: true,
        ack_lines: true,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    // Signals to the foreground process group, as a terminal sends them.
    Case {
        name: "sigint-handler",
        line: "python3 traps.py int",
        steps: &SIGNALLED,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "sigint-twice",
        line: "python3 traps.py int-twice",
        steps: &[
            Step::Await("ready"),
            Step::Signal(Signal::SIGINT),
            Step::Await("ready2"),
            Step::Signal(Signal::SIGINT),
        ],
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "sigint-keyboardinterrupt",
        line: "python3 traps.py none",
        steps: &SIGNALLED,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "sigterm",
        line: "python3 traps.py none",
        steps: &[Step::Await("ready"), Step::Signal(Signal::SIGTERM)],
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "sighup-handler",
        line: "python3 traps.py hup",
        steps: &[Step::Await("ready"), Step::Signal(Signal::SIGHUP)],
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "sigquit-handler",
        line: "python3 traps.py quit",
        steps: &[Step::Await("ready"), Step::Signal(Signal::SIGQUIT)],
        at_a_terminal: true,
        ..Case::PLAIN
    },
    // Not at a terminal: a typed Ctrl-Z is job control, which needs a job-control shell leading the terminal with
    // the command in a group of its own. The harness's terminal has none (its command leads the session, as on the
    // exec-server's terminal), and the kernel discards a typed SIGTSTP for such an orphaned group, natively and
    // forwarded alike: the case would compare two no-ops. docs/client.md states what Ctrl-Z does in TTY mode.
    Case {
        name: "ctrl-z-then-fg",
        line: "python3 tstp.py",
        steps: &[
            Step::Await("ready"),
            Step::Signal(Signal::SIGTSTP),
            Step::AwaitGroupStopped,
            Step::Release,
            Step::AwaitCommandStopped,
            Step::Signal(Signal::SIGCONT),
        ],
        ..Case::PLAIN
    },
    // Commands the builder does not have (ruff is wrapped, as every python command is, and missing there).
    Case { name: "missing-command", line: r#"ruff --version; echo "exit $?""#, at_a_terminal: true, ..Case::PLAIN },
    Case {
        name: "command-v-fallback",
        line: r#"command -v ruff && ruff --version || python3 -c 'print("no ruff: falling back")'"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    // Exit codes.
    Case {
        name: "exit-codes",
        line: r#"for code in 0 1 2 3 42 126 127 128 130 137 143 255; do python3 -c "raise SystemExit($code)"; echo "$code -> $?"; done"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "signal-deaths",
        line: r#"for s in HUP INT QUIT KILL SEGV TERM; do { python3 -c "import os, signal; os.kill(os.getpid(), signal.SIG$s)"; } 2>/dev/null; echo "SIG$s -> $?"; done"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "died-of-sigterm",
        line: "python3 -c 'import os, signal; os.kill(os.getpid(), signal.SIGTERM)'",
        at_a_terminal: true,
        ..Case::PLAIN
    },
    // The environment.
    Case {
        name: "env-on-command-line",
        line: r#"FOO_DIFFERENTIAL=bar python3 -c 'import os; print(os.environ.get("FOO_DIFFERENTIAL"))'"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "env-named-to-pass",
        line: r#"export SIDECAR_ENV_PASSTHROUGH=FOO_DIFFERENTIAL SSH_ENV_PASSTHROUGH=FOO_DIFFERENTIAL; FOO_DIFFERENTIAL=bar python3 -c 'import os; print(os.environ.get("FOO_DIFFERENTIAL"))'"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "env-allowlist",
        line: r#"export TERM=xterm-direct LANG=C.UTF-8 LC_ALL=C.UTF-8 LC_COLLATE=C TZ=Pacific/Chatham NO_COLOR=1 FORCE_COLOR=3 CI=true; python3 -c 'import os; [print(k, os.environ.get(k)) for k in ("TERM", "LANG", "LC_ALL", "LC_COLLATE", "TZ", "NO_COLOR", "FORCE_COLOR", "CI")]'"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "env-pattern",
        line: r#"export NPM_CONFIG_REGISTRY=http://registry.invalid/ SIDECAR_ENV_PASSTHROUGH='NPM_CONFIG_*' SSH_ENV_PASSTHROUGH='NPM_CONFIG_*'; python3 -c 'import os; print(os.environ.get("NPM_CONFIG_REGISTRY"))'"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    Case {
        name: "env-secret-stays",
        line: r#"AWS_SECRET_ACCESS_KEY=not-a-real-secret python3 -c 'import os; print(os.environ.get("AWS_SECRET_ACCESS_KEY"))'"#,
        at_a_terminal: true,
        ..Case::PLAIN
    },
    // A regular file as stdin, and where its offset is left.
    Case {
        name: "while-read-not-reading",
        line: r#"while read -r f; do python3 -c 'import sys; print("got", sys.argv[1])' "$f"; done < list.txt"#,
        ..Case::PLAIN
    },
    Case {
        name: "while-read-one-line-each",
        line: r#"while read -r f; do python3 readline.py "$f"; done < list.txt"#,
        ..Case::PLAIN
    },
    Case { name: "offset-after-command", line: r#"{ python3 -c 'print("first")'; cat; } < list.txt"#, ..Case::PLAIN },
];

/// The terminal column's own cases (TTY mode's tests, as a user at a terminal has them), which mean something only
/// on a terminal: whether the streams are one, its size and modes, prompts with typed input, Ctrl-C, Ctrl-D, colour,
/// redrawing in place. Keys are typed once the command waits for input ([`Step::Type`]).
pub const TERMINAL_CASES: &[Case] = &[
    Case {
        name: "isatty",
        line: r#"python3 -c 'import os, sys; print([f.isatty() for f in (sys.stdin, sys.stdout, sys.stderr)], os.environ.get("TERM"), os.isatty(os.open("/dev/tty", os.O_RDWR)))'"#,
        ..TERMINAL
    },
    Case {
        name: "stty-size",
        line: r#"python3 -c 'import os; print(os.get_terminal_size()); os.system("stty size; tput cols; tput lines")'"#,
        ..TERMINAL
    },
    Case { name: "stty-modes", line: r#"python3 -c 'import os; os.system("stty -a | tail -n +2")'"#, ..TERMINAL },
    Case {
        name: "stty-erase-set-here",
        line: r#"stty erase '^H'; python3 -c 'import os; os.system("stty -a | grep -o \"erase = [^;]*\"")'"#,
        ..TERMINAL
    },
    Case {
        name: "prompt-input",
        line: r#"python3 -c 'from ready import ready; ready(); print("hello", input("name? "))'"#,
        steps: &[Step::Await("ready"), Step::Type(b"Ada\r")],
        ..TERMINAL
    },
    Case {
        name: "prompt-no-echo",
        line: r#"python3 -c 'import getpass; from ready import ready; ready(); print("got", getpass.getpass("password: "))'"#,
        steps: &[Step::Await("ready"), Step::Type(b"s3cret\r")],
        ..TERMINAL
    },
    Case {
        name: "ctrl-c-at-a-prompt",
        line: r#"python3 -c 'from ready import ready; ready(); input("name? ")'"#,
        steps: &[Step::Await("ready"), Step::Type(b"\x03")],
        ..TERMINAL
    },
    Case {
        name: "ctrl-d-ends-input",
        line: r#"python3 -c 'import sys; from ready import ready; ready(); print(repr(sys.stdin.read()))'"#,
        steps: &[Step::Await("ready"), Step::Type(b"one\r"), Step::Type(b"two\x04"), Step::Type(b"\x04")],
        ..TERMINAL
    },
    Case {
        name: "repl",
        line: r#"python3 -q -i -c 'from ready import ready; ready()'"#,
        steps: &[
            Step::Await("ready"),
            Step::AwaitScreen(">>> "),
            Step::Type(b"6*7\r"),
            Step::AwaitScreen("42\r\n>>> "),
            Step::Type(b"\x03"),
            Step::AwaitScreen("KeyboardInterrupt\r\n>>> "),
            Step::Type(b"\x04"),
        ],
        ..TERMINAL
    },
    Case {
        name: "ls-color-auto",
        line: r#"mkdir sub && touch run.sh && chmod +x run.sh && python3 -c 'import os, subprocess; os.environ.pop("LS_COLORS", None); subprocess.run(["ls", "--color=auto", "-d", "sub", "run.sh", "list.txt"])'"#,
        ..TERMINAL
    },
    Case {
        name: "terminfo-colours",
        line: r#"python3 -c 'import curses, sys; curses.setupterm(); print(curses.tigetnum("colors")); sys.stdout.buffer.write(curses.tparm(curses.tigetstr("setaf"), 1) + b"red" + curses.tigetstr("sgr0") + b"\n")'"#,
        ..TERMINAL
    },
    Case {
        name: "progress-redraw",
        line: r##"python3 -c 'import sys
for i in range(0, 101, 20):
    sys.stdout.write("\r[%-10s] %3d%%" % ("#" * (i // 10), i)); sys.stdout.flush()
print(); print("a\rb\r\nc\r")'"##,
        ..TERMINAL
    },
];

/// A terminal case's defaults.
const TERMINAL: Case = Case { at_a_terminal: true, ..Case::PLAIN };

/// The terminal column's cases: the corpus's that are at a terminal ([`Case::at_a_terminal`]), then its own.
pub fn at_a_terminal() -> Vec<Case> {
    CASES.iter().filter(|case| case.at_a_terminal).chain(TERMINAL_CASES).copied().collect()
}
