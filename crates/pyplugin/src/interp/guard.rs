//! The host's own Python (P-11, P-23): what the interpreter thread runs once, before any
//! plugin code, to make the shared interpreter safe to hand to plugins.

/// The host's own Python, run once when the interpreter thread starts: the `HookTimeout`
/// exception and `install`, which scrubs secrets from the plugins' view of the environment
/// (P-11) and replaces what would end, signal or overflow the server process with functions
/// that raise `PluginForbidden` (documented in `plugin_api.py`).
pub(super) const GUARD: &std::ffi::CStr = cr##"
import _thread
import faulthandler
import os
import posix
import re
import signal
import sys

try:
    import _signal
except ImportError:
    _signal = None
try:
    import resource
except ImportError:
    resource = None


class HookTimeout(BaseException):
    """Raised into a hook that overran its time limit."""


class PluginForbidden(RuntimeError):
    """Raised into a plugin that calls what would end, signal or stall the server process."""


class ReleaseWatch:
    """While this thread frees objects of a released epoch: the finalizers (`__del__`) that
    this host's HookTimeout interrupted, as (qualified name, file of its code), as
    `sys.unraisablehook` (installed once per process, shared by every host's thread) reports
    them."""

    def __init__(self):
        self.timeout = HookTimeout
        self.interrupted = []
        self.thread = _thread.get_ident()
        sys._csg_release_watches[self.thread] = self

    def close(self):
        sys._csg_release_watches.pop(self.thread, None)


_SECRET_NAME = re.compile("TOKEN|SECRET|PASSWORD|KEY", re.IGNORECASE)
# scheme://userinfo@ : a user and password (or a token as the user) in a URL.
_URL_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s]*@")


def _secret(name, value):
    name, value = os.fsdecode(name), os.fsdecode(value)
    return bool(_SECRET_NAME.search(name) or _URL_CREDENTIALS.search(value))


def _scrub_environ():
    # Only the interpreter's copies: deleting through os.environ would unsetenv() the variable
    # in the server process, which still needs it. os.environb shares os.environ's dict.
    for mapping in (os.environ._data, posix.environ):
        for key in [k for k, v in mapping.items() if _secret(k, v)]:
            del mapping[key]


def _refuse(what, why):
    raise PluginForbidden(f"{what} is not available to server plugins: {why}")


def _forbid(module, names, why):
    for name in names:
        if hasattr(module, name):
            def refused(*args, _what=f"{module.__name__}.{name}", **kwargs):
                _refuse(_what, why)
            refused.__name__ = refused.__qualname__ = name
            setattr(module, name, refused)


def install(recursion_limit, thread_stack):
    """Makes the interpreter safe to hand to plugins; once per process (hosts share it)."""
    if getattr(sys, "_csg_guarded", False):
        return
    sys._csg_guarded = True
    sys._csg_release_watches = {}
    reported = sys.unraisablehook
    function_type = type(install)

    def unraisablehook(unraisable, /):
        watch = sys._csg_release_watches.get(_thread.get_ident())
        if watch is not None and unraisable.exc_type is watch.timeout:
            what = unraisable.object
            # Only a plain function's names: reading them runs no plugin code.
            if type(what) is function_type:
                watch.interrupted.append((str.__str__(what.__qualname__),
                                          str.__str__(what.__code__.co_filename)))
        reported(unraisable)

    sys.unraisablehook = unraisablehook
    sys.setrecursionlimit(recursion_limit)
    _thread.stack_size(thread_stack)
    _scrub_environ()

    getpid, getpgid = os.getpid, os.getpgid
    host_pid = getpid()

    def in_host():
        # A child a plugin forked (multiprocessing) may still exit or exec itself.
        return getpid() == host_pid

    def own_group(group):
        try:
            return group == getpgid(0)
        except OSError:
            return False

    real_exit, real_abort, real_kill = os._exit, os.abort, os.kill
    real_killpg = getattr(os, "killpg", None)

    def _exit(status):
        if in_host():
            _refuse("os._exit", "it would end the server process; raise an exception instead")
        real_exit(status)

    def abort():
        if in_host():
            _refuse("os.abort", "it would end the server process")
        real_abort()

    def kill(pid, sig, /):
        # 0: this process's group; -1: every process it may signal; -N: group N.
        if (in_host() and isinstance(pid, int) and sig != 0
                and (pid in (0, -1, host_pid) or (pid < -1 and own_group(-pid)))):
            _refuse(f"os.kill({pid}, {sig})", "it would signal the server process")
        return real_kill(pid, sig)

    def killpg(pgid, sig, /):
        if in_host() and isinstance(pgid, int) and sig != 0 and (pgid == 0 or own_group(pgid)):
            _refuse(f"os.killpg({pgid}, {sig})", "it would signal the server's process group")
        return real_killpg(pgid, sig)

    replaced = {"_exit": _exit, "abort": abort, "kill": kill}
    if real_killpg is not None:
        replaced["killpg"] = killpg
    for name in ("execv", "execve"):
        real = getattr(os, name, None)
        if real is None:
            continue

        def exec_(*args, _real=real, _name=name):
            if in_host():
                _refuse(f"os.{_name}", "it would replace the server process")
            return _real(*args)

        replaced[name] = exec_
    for name, function in replaced.items():
        function.__name__ = function.__qualname__ = name
        setattr(os, name, function)
        if hasattr(posix, name):
            setattr(posix, name, function)

    signals = "it would change or send the server process's signals"
    for module in (signal, _signal):
        if module is not None:
            _forbid(module, ("signal", "raise_signal", "pthread_kill", "alarm", "setitimer",
                             "siginterrupt"), signals)
    _forbid(_thread, ("interrupt_main",), signals)
    _forbid(faulthandler, ("register", "_sigsegv", "_sigabrt", "_sigfpe", "_fatal_error",
                           "_fatal_error_c_thread", "_stack_overflow", "_read_null"),
            "it would crash the server or take over its signals")
    real_later = faulthandler.dump_traceback_later

    def dump_traceback_later(timeout, repeat=False, file=sys.__stderr__, exit=False):
        if exit:
            _refuse("faulthandler.dump_traceback_later(exit=True)",
                    "it would end the server process")
        return real_later(timeout, repeat, file, exit)

    faulthandler.dump_traceback_later = dump_traceback_later
    if resource is not None:
        _forbid(resource, ("setrlimit", "prlimit"), "it would change the server process's limits")

    real_recursion = sys.setrecursionlimit

    def setrecursionlimit(limit, /):
        if isinstance(limit, int) and limit > recursion_limit:
            _refuse(f"sys.setrecursionlimit({limit})",
                    f"the interpreter's stack is sized for a limit of {recursion_limit}")
        real_recursion(limit)

    real_switch = sys.setswitchinterval
    switch = sys.getswitchinterval()

    def setswitchinterval(interval, /):
        if interval > switch:
            _refuse(f"sys.setswitchinterval({interval})",
                    f"a plugin thread would hold the interpreter for longer than {switch} s")
        real_switch(interval)

    real_stack = _thread.stack_size

    def stack_size(size=0, /):
        if size and size < thread_stack:
            _refuse(f"threading.stack_size({size})",
                    f"threads need at least {thread_stack} bytes of stack for the recursion limit")
        return real_stack(size) if size else real_stack()

    sys.setrecursionlimit = setrecursionlimit
    sys.setswitchinterval = setswitchinterval
    _thread.stack_size = stack_size
    threading = sys.modules.get("threading")
    if threading is not None:
        threading.stack_size = stack_size
"##;
