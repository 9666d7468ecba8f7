//! `os.environ` as plugins see it carries no secret (issue 29, point 13; P-11). A test binary
//! of its own with a single test: it sets variables in its own process environment before the
//! interpreter starts, which no other test must see.
#![cfg(feature = "python")]

mod bounded;
mod common;

use bounded::within;
use common::{host, plugin_dir};
use pyplugin::Hook;
use serde_json::{Value, json};
use std::time::Duration;

const VARIABLES: &[(&str, &str)] = &[
    ("CSGT_API_TOKEN", "tok-secret-1"),
    ("CSGT_Client_Secret", "secret-2"),
    ("csgt_db_password", "secret-3"),
    ("CSGT_SIGNING_KEY", "secret-4"),
    (
        "CSGT_DATABASE_URL",
        "postgres://app:secret-5@db.internal:5432/app",
    ),
    (
        "CSGT_MIRROR",
        "https://deploy-token-secret-6@git.example.com/acme.git",
    ),
    ("CSGT_PLAIN", "visible"),
    ("CSGT_SITE", "https://example.com/users/@me"),
];

#[test]
fn p11_plugins_see_no_secret_in_the_environment_and_the_server_keeps_it() {
    for (name, value) in VARIABLES {
        // SAFETY: the only test of this binary, before any thread of it (or the interpreter)
        // starts.
        unsafe { std::env::set_var(name, value) };
    }
    within(Duration::from_secs(60), || {
        // What the file's top-level code sees (before any hook), and what a hook sees through
        // every view of the environment Python has.
        let dir = plugin_dir(&[(
            "env.py",
            "import os, posix\n\
             def _ours(names):\n    return sorted(n for n in names if n.lower().startswith('csgt_'))\n\
             _AT_LOAD = _ours(os.environ)\n\
             def on_read_result(result):\n    return {\"notes\": [repr({\n        'load': _AT_LOAD,\n        'environ': {n: os.environ[n] for n in _ours(os.environ)},\n        'environb': _ours(n.decode() for n in os.environb),\n        'posix': _ours(n.decode() for n in posix.environ),\n        'getenv': os.getenv('CSGT_API_TOKEN'),\n    })]}\n",
        )]);
        let host = host(dir.path());
        let out = host
            .current()
            .unwrap()
            .run_blocking(Hook::ReadResult, Hook::ReadResult.sample_payload());
        let Value::String(seen) = &out.value["notes"][0] else {
            panic!("{out:?}");
        };
        assert!(!seen.contains("secret"), "{seen}");
        let expected = "{'load': ['CSGT_PLAIN', 'CSGT_SITE'], \
            'environ': {'CSGT_PLAIN': 'visible', 'CSGT_SITE': 'https://example.com/users/@me'}, \
            'environb': ['CSGT_PLAIN', 'CSGT_SITE'], 'posix': ['CSGT_PLAIN', 'CSGT_SITE'], \
            'getenv': None}";
        assert_eq!(out.value["notes"], json!([expected]));
        // Only the interpreter's copy was scrubbed: the process still has every variable.
        for (name, value) in VARIABLES {
            assert_eq!(std::env::var(name).as_deref(), Ok(*value), "{name}");
        }
    });
}
