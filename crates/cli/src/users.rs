//! `csg user`, `csg token` and `csg grant` (A-1..A-3, O-1): the access store of the data
//! directory, changed in place; running servers see a change on their next call.

use anyhow::{Context, Result};
use clap::Subcommand;
use gitstore::{GitStore, RepoName};
use std::time::SystemTime;

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user.
    Add {
        name: String,
        /// Give the user the `prepare` capability (sync, pin, reindex, reload plugins).
        #[arg(long)]
        prepare: bool,
    },
    /// Give (`on`) or take (`off`) the `prepare` capability.
    Prepare {
        name: String,
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// List users, their capability and their grants.
    List,
    /// Remove a user: their tokens are revoked, their grants dropped.
    Remove { name: String },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token for USER and print it once (it is stored only as a hash).
    Create {
        user: String,
        /// A name to tell the token apart (default `token-N`).
        #[arg(long)]
        name: Option<String>,
    },
    /// List tokens (never their secrets): id, user, name, created, last used, revoked.
    List {
        /// Only this user's tokens.
        #[arg(long)]
        user: Option<String>,
    },
    /// Revoke a token by id: refused from the next call on, by every server.
    Revoke { id: i64 },
}

#[derive(Debug, clap::Args)]
pub struct GrantArgs {
    /// The user (with `--group`: the identity provider's group).
    user: String,
    /// The repository, `owner/name`.
    repo: String,
    /// Take the grant back instead.
    #[arg(long)]
    remove: bool,
    /// Grant the members of an identity provider's group (as its groups claim names it,
    /// issue 44) rather than a user.
    #[arg(long)]
    group: bool,
}

fn open(store: &GitStore) -> Result<access::AccessStore> {
    service::open_access(store).context("cannot open the access store")
}

/// `csg user …`.
pub fn user(store: &GitStore, command: UserCommand) -> Result<()> {
    let access = open(store)?;
    match command {
        UserCommand::Add { name, prepare } => {
            access.add_user(&name, prepare)?;
            let capability = if prepare {
                " with the prepare capability"
            } else {
                ""
            };
            println!(
                "added user {name}{capability}; create a token with `csg token create {name}`"
            );
        }
        UserCommand::Prepare { name, state } => {
            access.set_prepare(&name, state == "on")?;
            println!("prepare capability of {name}: {state}");
        }
        UserCommand::List => {
            let grants = access.grants()?;
            let group_grants = access.group_grants()?;
            for user in access.users()? {
                let capability = if user.prepare { "prepare" } else { "read" };
                println!(
                    "{}\t{capability}\t{}",
                    user.name,
                    repos_of(&grants, &user.name)
                );
            }
            // The identity provider's groups with grants (`csg grant --group`), after the
            // users: `group:NAME`, which no user name can be.
            let mut groups: Vec<&str> = group_grants.iter().map(|g| g.user.as_str()).collect();
            groups.dedup();
            for group in groups {
                println!("group:{group}\tgroup\t{}", repos_of(&group_grants, group));
            }
        }
        UserCommand::Remove { name } => {
            access.remove_user(&name)?;
            println!("removed user {name}; their tokens are revoked");
        }
    }
    Ok(())
}

/// `csg token …`.
pub fn token(store: &GitStore, command: TokenCommand) -> Result<()> {
    let access = open(store)?;
    match command {
        TokenCommand::Create { user, name } => {
            let new = access.create_token(&user, name.as_deref())?;
            eprintln!(
                "csg: token {} ({}) for {user}; it is shown only now: store it in \
                 SOURCEGRAPH_API_TOKEN or your client's secret store",
                new.info.id, new.info.name
            );
            println!("{}", new.secret);
        }
        TokenCommand::List { user } => {
            for token in access.tokens(user.as_deref())? {
                println!(
                    "{}\t{}\t{}\tcreated {}\tlast used {}\t{}",
                    token.id,
                    token.user,
                    token.name,
                    when(Some(token.created)),
                    when(token.last_used),
                    token.revoked.map_or("active".to_owned(), |at| format!(
                        "revoked {}",
                        when(Some(at))
                    ))
                );
            }
        }
        TokenCommand::Revoke { id } => {
            access.revoke_token(id)?;
            println!("revoked token {id}");
        }
    }
    Ok(())
}

/// `csg grant [--group] WHO REPO [--remove]`.
pub fn grant(store: &GitStore, args: GrantArgs) -> Result<()> {
    let access = open(store)?;
    let repo = RepoName::parse(&args.repo)?;
    let who = if args.group {
        format!("the group {:?}", args.user)
    } else {
        args.user.clone()
    };
    if args.remove {
        let had = if args.group {
            access.ungrant_group(&args.user, repo.as_str())?
        } else {
            access.ungrant(&args.user, repo.as_str())?
        };
        println!(
            "{who} {} read on {repo}",
            if had { "no longer has" } else { "did not have" }
        );
        return Ok(());
    }
    let info = store.repo(&repo)?;
    if args.group {
        access.grant_group(&args.user, repo.as_str())?;
    } else {
        access.grant(&args.user, repo.as_str())?;
    }
    let note = if info.private {
        ""
    } else {
        " (it is public: everyone may read it anyway)"
    };
    println!("{who} may read {repo}{note}");
    Ok(())
}

/// The repositories `grants` give `who`, comma-separated, or `-`.
fn repos_of(grants: &[access::GrantInfo], who: &str) -> String {
    let repos: Vec<&str> = grants
        .iter()
        .filter(|g| g.user == who)
        .map(|g| g.repo.as_str())
        .collect();
    if repos.is_empty() {
        "-".to_owned()
    } else {
        repos.join(",")
    }
}

/// A time as RFC 3339 UTC to the second, or `never`.
fn when(time: Option<SystemTime>) -> String {
    time.map_or_else(|| "never".to_owned(), service::rfc3339)
}
