//! The README's settings tables, made from the definitions (O-3): the `csg` settings
//! ([`crate::settings::SETTINGS`]), the repository-plugin budgets
//! ([`wasmplugin::PluginConfig::SETTINGS`]) and the server-plugin settings
//! ([`crate::server_plugin_env::ServerPluginEnv::SETTINGS`]).
//!
//! Each table sits in README.md between a line `<!-- <generated:NAME> -->` and a line
//! `<!-- </generated:NAME> -->`; everything outside the blocks is hand-written and stays. A
//! test regenerates the blocks and fails when the committed README differs;
//! `CSG_BLESS=1 cargo test -p csg readme` rewrites them.

use crate::server_plugin_env::ServerPluginEnv;
use crate::setting::{Def, Scope};
use crate::settings::SETTINGS;
use std::fmt::Write as _;

/// A generated block: its name and what renders it.
type Block = (&'static str, fn() -> String);

/// The generated blocks.
const BLOCKS: &[Block] = &[
    ("csg-settings", csg_settings),
    ("repository-plugin-settings", repository_plugin_settings),
    ("server-plugin-settings", server_plugin_settings),
];

/// The table of `csg` settings.
fn csg_settings() -> String {
    let mut out = String::from(
        "| flag | environment | TOML key | commands | default | meaning |\n\
         | --- | --- | --- | --- | --- | --- |\n",
    );
    for def in SETTINGS {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} |",
            def.long(),
            environment(def),
            if def.in_file {
                format!("`{}`", def.key)
            } else {
                "—".to_owned()
            },
            commands(def.scope),
            with_size(def.key, &def.default_shown()),
            cell(&meaning(def))
        );
    }
    out
}

/// The table of `SOURCEGRAPH_PLUGINS_*` budgets.
fn repository_plugin_settings() -> String {
    let mut out = String::from("| environment | default | meaning |\n| --- | --- | --- |\n");
    for setting in wasmplugin::PluginConfig::SETTINGS {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            setting.variable(),
            with_size(setting.name, &format!("`{}`", setting.default_text())),
            cell(setting.help)
        );
    }
    out
}

/// The table of `SOURCEGRAPH_SERVER_PLUGINS_*` settings.
fn server_plugin_settings() -> String {
    let mut out = String::from("| environment | default | meaning |\n| --- | --- | --- |\n");
    for setting in ServerPluginEnv::SETTINGS {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} |",
            setting.variable(),
            setting.default_shown(),
            cell(setting.help)
        );
    }
    out
}

fn environment(def: &Def) -> String {
    match def.field {
        crate::setting::Field::List(_) => format!("`{}` (comma-separated)", def.env),
        _ => format!("`{}`", def.env),
    }
}

fn commands(scope: Scope) -> String {
    match scope {
        Scope::Global => "all".to_owned(),
        scope => {
            let names: Vec<String> = scope
                .subcommands()
                .iter()
                .map(|name| format!("`{name}`"))
                .collect();
            names.join(", ")
        }
    }
}

/// The help text, then what the setting accepts.
fn meaning(def: &Def) -> String {
    match def.accepts() {
        Some(accepts) => format!("{} {accepts}", def.help),
        None => def.help.to_owned(),
    }
}

/// `` `262144` `` becomes `` `262144` (256 KiB) `` for a setting of bytes.
fn with_size(name: &str, shown: &str) -> String {
    let bytes = name.to_ascii_lowercase().ends_with("bytes");
    let value = shown
        .strip_prefix('`')
        .and_then(|rest| rest.strip_suffix('`'))
        .and_then(|number| number.parse::<u64>().ok());
    match value {
        Some(value) if bytes && value >= 1024 && value % 1024 == 0 => {
            let (amount, unit) = if value % (1024 * 1024) == 0 {
                (value / (1024 * 1024), "MiB")
            } else {
                (value / 1024, "KiB")
            };
            format!("{shown} ({amount} {unit})")
        }
        _ => shown.to_owned(),
    }
}

/// Text fit for one table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// `readme` with every generated block replaced by what the definitions give. Errors name a
/// block that is missing or does not end.
fn render(readme: &str) -> Result<String, String> {
    let mut out = readme.to_owned();
    for (name, body) in BLOCKS {
        let begin = format!("<!-- <generated:{name}> -->\n");
        let end = format!("<!-- </generated:{name}> -->");
        let start = out
            .find(&begin)
            .ok_or_else(|| format!("README.md has no line {begin:?}"))?
            + begin.len();
        let stop = out[start..]
            .find(&end)
            .ok_or_else(|| format!("README.md's block {name} does not end with {end:?}"))?
            + start;
        out.replace_range(start..stop, &body());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");

    /// O-3: the README's settings tables are what the definitions give, and list every
    /// setting exactly once. `CSG_BLESS=1 cargo test -p csg readme` rewrites the blocks
    /// instead (the prose around them stays).
    #[test]
    fn o3_readme_settings_tables_are_generated() {
        let committed = std::fs::read_to_string(README).unwrap();
        let fresh = render(&committed).unwrap();
        if std::env::var_os("CSG_BLESS").is_some() && fresh != committed {
            std::fs::write(README, &fresh).unwrap();
            return;
        }
        let rows = |start: &str| {
            committed
                .lines()
                .filter(|line| line.starts_with(start))
                .count()
        };
        for def in SETTINGS {
            let row = format!("| `{}` | ", def.long());
            assert_eq!(rows(&row), 1, "README rows for {}", def.long());
        }
        for setting in wasmplugin::PluginConfig::SETTINGS {
            let row = format!("| `{}` | ", setting.variable());
            assert_eq!(rows(&row), 1, "README rows for {}", setting.variable());
        }
        for setting in ServerPluginEnv::SETTINGS {
            let row = format!("| `{}` | ", setting.variable());
            assert_eq!(rows(&row), 1, "README rows for {}", setting.variable());
        }
        assert!(
            fresh == committed,
            "README.md's settings tables have drifted from the definitions; regenerate them \
             with `CSG_BLESS=1 cargo test -p csg readme` and review the diff"
        );
    }

    /// Rendering is stable, keeps the text outside the blocks and refuses a missing or
    /// unended block.
    #[test]
    fn o3_readme_render_keeps_the_prose() {
        let mut text = String::from("intro\n");
        for (name, _) in BLOCKS {
            text.push_str(&format!(
                "<!-- <generated:{name}> -->\nstale\n<!-- </generated:{name}> -->\nbetween\n"
            ));
        }
        let once = render(&text).unwrap();
        assert!(once.starts_with("intro\n") && once.ends_with("between\n"));
        assert!(!once.contains("stale"));
        assert_eq!(render(&once).unwrap(), once);
        assert!(render("intro\n").unwrap_err().contains("csg-settings"));
        let unended = "<!-- <generated:csg-settings> -->\nrow\n";
        assert!(render(unended).unwrap_err().contains("does not end"));
        assert_eq!(with_size("x_bytes", "`262144`"), "`262144` (256 KiB)");
        assert_eq!(
            with_size("ARTIFACT_BYTES", "`33554432`"),
            "`33554432` (32 MiB)"
        );
        assert_eq!(with_size("max_searches", "`1024`"), "`1024`");
    }
}
