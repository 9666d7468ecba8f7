//! Compiles in a child process (O-9, W-30): Cranelift cannot be interrupted, but a process
//! can be killed, so a compile the runtime gives up on stops at once instead of holding the
//! compile slot (and a core) until it ends.
//!
//! The child is the host program itself, started with [`COMPILE_CHILD_ARG`] (its `main`
//! calls [`compile_child_if_asked`] before anything else). It builds an engine from the same
//! settings as the runtime's, so `Module::deserialize` in the parent accepts what
//! `Engine::precompile_module` in the child wrote (wasmtime checks the engine settings and
//! its own version and refuses anything else).
//!
//! The exchange, over the child's stdin and stdout:
//! - in: [`MAGIC`], MEMORY_MIB in bytes (`u64` LE), instance slots (`u32` LE), the artifact's
//!   length (`u64` LE), the artifact. Then stdin stays open: the child exits as soon as it
//!   closes, so a parent that dies or stops waiting leaves no compile behind.
//! - out: `0` and the compiled module, or `1` and wasmtime's reason (for the debug log only).

use std::ffi::OsStr;
use std::io::{self, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use super::{EngineSettings, wasm_config};
use crate::config::{COMPILE_CHILD_ARG, CompileCommand};

/// Starts the request on the child's stdin (and names the exchange's version: parent and
/// child are one program, so they always agree).
const MAGIC: &[u8; 8] = b"csgwc\0\0\x01";

/// How often the parent looks at whether to stop a running compile: a compile given up on
/// (abandoned, preempted, over its cap, shutdown) is killed within this interval (W-30,
/// issue 42: no blocking work outlives its call by more than ~100 ms).
const POLL: Duration = Duration::from_millis(10);

/// Largest reason the child may give for a refused module (it only goes to the debug log).
const REASON_BYTES: u64 = 4096;

/// Runs the compile child and answers its exit code when this process was started as one
/// (its first argument is [`COMPILE_CHILD_ARG`]); `None` otherwise. A program that gives
/// the runtime a [`CompileCommand`] naming itself calls this first thing in `main`.
pub fn compile_child_if_asked() -> Option<ExitCode> {
    let first = std::env::args_os().nth(1)?;
    (first == OsStr::new(COMPILE_CHILD_ARG)).then(child_main)
}

/// Why a compile in the child gave no module.
#[derive(Debug)]
pub(super) enum Failure<S> {
    /// The child could not be started or spoken to: the host's problem, not the artifact's.
    Start(io::Error),
    /// wasmtime refused the module; the reason is for the debug log.
    Refused(String),
    /// The child died or answered nonsense (killed for memory, a crash).
    Crashed(String),
    /// `stop` asked for it; the child has exited.
    Stopped(S),
}

/// Compiles `artifact` in a child started by `command` and answers the compiled module's
/// bytes (for `Module::deserialize` on an engine made from `settings`). `stop` is asked once
/// before the child starts (nothing is started for a compile already given up) and then
/// every [`POLL`] while it runs; when it answers, the child is killed and waited for (the
/// caller's compile slot stays taken until the child has exited).
pub(super) fn compile<S>(
    command: &CompileCommand,
    settings: EngineSettings,
    artifact: &Arc<[u8]>,
    mut stop: impl FnMut() -> Option<S>,
) -> Result<Vec<u8>, Failure<S>> {
    if let Some(why) = stop() {
        return Err(Failure::Stopped(why));
    }
    let child = Command::new(&command.program)
        .args(&command.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(Failure::Start)?;
    let mut child = Reaped(child);
    let (Some(stdin), Some(stdout)) = (child.0.stdin.take(), child.0.stdout.take()) else {
        return Err(Failure::Start(io::Error::other(
            "the child's pipes are missing",
        )));
    };
    let (sent, answer) = mpsc::channel();
    let artifact = artifact.clone();
    // Writing the artifact and reading the module block; they run beside the loop that may
    // have to kill the child meanwhile (which ends both with an error or end of file).
    let io = std::thread::Builder::new()
        .name("wasmplugin-compile-io".into())
        .stack_size(64 << 10)
        .spawn(move || {
            let _ = sent.send(exchange(stdin, stdout, settings, &artifact));
        })
        .map_err(Failure::Start)?;
    let answer = loop {
        match answer.recv_timeout(POLL) {
            Ok(answer) => break answer,
            Err(RecvTimeoutError::Disconnected) => {
                break Err(io::Error::other(
                    "the exchange thread ended without an answer",
                ));
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Some(why) = stop() {
                    child.end();
                    let _ = io.join();
                    return Err(Failure::Stopped(why));
                }
            }
        }
    };
    let _ = io.join();
    let status = child.wait();
    let (tag, body) = answer.map_err(|error| Failure::Crashed(error.to_string()))?;
    match (status, tag) {
        (Ok(status), 0) if status.success() => Ok(body),
        (Ok(status), 1) if status.success() => Err(Failure::Refused(
            String::from_utf8_lossy(&body).into_owned(),
        )),
        (Ok(status), _) => Err(Failure::Crashed(format!(
            "the compile child exited with {status} after answering {tag}"
        ))),
        (Err(error), _) => Err(Failure::Crashed(error.to_string())),
    }
}

/// The parent's half of the exchange: the request in, the tag and body out. Stdin is held
/// open until the answer has been read, because its end tells the child to stop.
fn exchange(
    mut stdin: ChildStdin,
    stdout: ChildStdout,
    settings: EngineSettings,
    artifact: &[u8],
) -> io::Result<(u8, Vec<u8>)> {
    let mut header = Vec::with_capacity(28);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&settings.memory_bytes.to_le_bytes());
    header.extend_from_slice(&settings.slots.to_le_bytes());
    header.extend_from_slice(&(artifact.len() as u64).to_le_bytes());
    stdin.write_all(&header)?;
    stdin.write_all(artifact)?;
    stdin.flush()?;
    let mut stdout = stdout;
    let mut tag = [0u8; 1];
    stdout.read_exact(&mut tag)?;
    // Compiled code is a few times the size of the Wasm it came from; a child answering far
    // more is broken, and must not make the parent hold it.
    let limit = match tag[0] {
        0 => (artifact.len() as u64)
            .saturating_mul(64)
            .saturating_add(64 << 20),
        _ => REASON_BYTES,
    };
    let mut body = Vec::new();
    stdout.take(limit + 1).read_to_end(&mut body)?;
    if body.len() as u64 > limit {
        return Err(io::Error::other("the compile child answered too much"));
    }
    drop(stdin);
    Ok((tag[0], body))
}

/// A child that is killed and waited for if it is dropped before it exited (an early return
/// or a panic must not leave a compile running).
struct Reaped(Child);

impl Reaped {
    /// Kills the child and waits until it has exited.
    fn end(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }

    fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        self.0.wait()
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if !matches!(self.0.try_wait(), Ok(Some(_))) {
            self.end();
        }
    }
}

/// The child's whole life: read the request, compile, answer, exit.
fn child_main() -> ExitCode {
    let Ok((settings, artifact)) = read_request(&mut io::stdin().lock()) else {
        return ExitCode::from(2);
    };
    // The parent holds stdin open while it wants the answer: its end (the parent stopped
    // waiting, or died) ends this process, compile or not.
    let watcher = std::thread::Builder::new()
        .name("compile-child-stdin".into())
        .stack_size(64 << 10)
        .spawn(|| {
            let mut byte = [0u8; 1];
            let _ = io::stdin().read(&mut byte);
            std::process::exit(3);
        });
    if watcher.is_err() {
        return ExitCode::from(2);
    }
    // Cranelift's recursion is shallow, but an untrusted module should not find the main
    // thread's stack size, whatever the environment made it.
    let compiled = std::thread::Builder::new()
        .name("compile-child".into())
        .stack_size(8 << 20)
        .spawn(move || {
            let engine = wasmtime::Engine::new(&wasm_config(settings))?;
            engine.precompile_module(&artifact)
        })
        .map(|thread| thread.join());
    let (tag, body) = match compiled {
        Ok(Ok(Ok(module))) => (0u8, module),
        Ok(Ok(Err(error))) => (1, format!("{error:#}").into_bytes()),
        Ok(Err(_)) => (1, b"the compiler panicked".to_vec()),
        Err(_) => return ExitCode::from(2),
    };
    let mut stdout = io::stdout().lock();
    let written = stdout
        .write_all(&[tag])
        .and_then(|()| stdout.write_all(&body))
        .and_then(|()| stdout.flush());
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(2),
    }
}

/// Reads the request of [`exchange`].
fn read_request(input: &mut impl Read) -> io::Result<(EngineSettings, Vec<u8>)> {
    let mut header = [0u8; 28];
    input.read_exact(&mut header)?;
    let (magic, rest) = header.split_at(8);
    if magic != MAGIC {
        return Err(io::Error::other("not a compile request"));
    }
    let (memory, rest) = rest.split_at(8);
    let (slots, length) = rest.split_at(4);
    let settings = EngineSettings {
        memory_bytes: u64::from_le_bytes(memory.try_into().map_err(io::Error::other)?),
        slots: u32::from_le_bytes(slots.try_into().map_err(io::Error::other)?),
    };
    let length = u64::from_le_bytes(length.try_into().map_err(io::Error::other)?);
    let mut artifact = Vec::new();
    input.take(length).read_to_end(&mut artifact)?;
    if artifact.len() as u64 != length {
        return Err(io::Error::other("the artifact was cut short"));
    }
    Ok((settings, artifact))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request reads back as written, and a cut or foreign one is refused.
    #[test]
    fn o9_compile_request_round_trip() {
        let settings = EngineSettings {
            memory_bytes: 256 << 20,
            slots: 16,
        };
        let mut request = Vec::new();
        request.extend_from_slice(MAGIC);
        request.extend_from_slice(&settings.memory_bytes.to_le_bytes());
        request.extend_from_slice(&settings.slots.to_le_bytes());
        request.extend_from_slice(&3u64.to_le_bytes());
        request.extend_from_slice(b"abc");
        let (read, artifact) = read_request(&mut request.as_slice()).unwrap();
        assert_eq!((read, artifact.as_slice()), (settings, &b"abc"[..]));
        assert!(read_request(&mut &request[..request.len() - 1]).is_err());
        let mut foreign = request.clone();
        foreign[0] = b'x';
        assert!(read_request(&mut foreign.as_slice()).is_err());
    }
}
