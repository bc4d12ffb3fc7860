//! `polygateway keys …` and `polygateway teams …` (docs/keys.md#cli): the admin operations of
//! `ops.rs` — the same code as the HTTP API — on the store of the `.env` and environment
//! settings `serve` reads, printing JSON on stdout. Exit status 0 on success, 1 with
//! `polygateway: <message>` on stderr otherwise.

use std::io::Write;
use std::process::ExitCode;

use serde_json::json;

use super::ops::{CreateKey, CreateTeam, KeyAdmin, KeyFilter, parse_budget_arg};
use super::{KeyLimits, KeyState, KeyStore, KeysError, parse_rfc3339};
use crate::config;
use crate::governance::SystemClock;

/// The rate gates a key or team is created with.
#[derive(Debug, clap::Args)]
pub struct LimitArgs {
    /// Requests per minute.
    #[arg(long)]
    rpm: Option<u32>,
    /// Tokens (prompt + completion) per minute.
    #[arg(long)]
    tpm: Option<u64>,
    /// Calls in flight at once.
    #[arg(long)]
    max_concurrency: Option<u32>,
}

impl LimitArgs {
    fn limits(&self) -> Option<KeyLimits> {
        let l = KeyLimits {
            rpm: self.rpm,
            tpm: self.tpm,
            max_concurrency: self.max_concurrency,
        };
        (l != KeyLimits::default()).then_some(l)
    }
}

/// `polygateway keys …`.
#[derive(Debug, clap::Subcommand)]
pub enum KeysCommand {
    /// Create a key; prints `{"key", "secret"}` — the secret is shown this once.
    Create {
        #[arg(long)]
        name: String,
        /// The team id it belongs to.
        #[arg(long)]
        team: Option<String>,
        /// The model aliases it may call, comma-separated (default: every scope).
        #[arg(long, value_delimiter = ',')]
        scopes: Option<Vec<String>>,
        #[command(flatten)]
        limits: LimitArgs,
        /// `PERIOD:LIMIT_USD[:SOFT_LIMIT_USD]`, e.g. `daily:10.0:8.0`; repeat for more periods.
        #[arg(long = "budget")]
        budgets: Vec<String>,
        /// When it stops working: RFC 3339 (`2027-01-01T00:00:00Z`) or Unix seconds.
        #[arg(long)]
        expires_at: Option<String>,
    },
    /// List keys: `{"data": [...]}`.
    List {
        #[arg(long)]
        team: Option<String>,
        /// `active` or `revoked`.
        #[arg(long)]
        state: Option<String>,
    },
    /// Print one key.
    Show { id: String },
    /// Give a key a new secret; prints `{"key", "secret"}`.
    Rotate { id: String },
    /// Revoke a key for good.
    Revoke { id: String },
}

/// `polygateway teams …`.
#[derive(Debug, clap::Subcommand)]
pub enum TeamsCommand {
    /// Create a team.
    Create {
        #[arg(long)]
        name: String,
        /// A slug `[a-z0-9_-]{1,64}` (default: `team_` + 16 random characters).
        #[arg(long)]
        id: Option<String>,
        #[command(flatten)]
        limits: LimitArgs,
        /// `PERIOD:LIMIT_USD[:SOFT_LIMIT_USD]`; repeat for more periods.
        #[arg(long = "budget")]
        budgets: Vec<String>,
    },
    /// List teams: `{"data": [...]}`.
    List,
}

/// Either command group.
#[derive(Debug)]
pub enum Command {
    Keys(KeysCommand),
    Teams(TeamsCommand),
}

fn budgets(args: &[String]) -> Result<Option<Vec<super::BudgetSpec>>, KeysError> {
    if args.is_empty() {
        return Ok(None);
    }
    args.iter()
        .map(|a| parse_budget_arg("--budget", a))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `--expires-at` as Unix seconds (what the admin JSON takes).
fn expires_at(arg: Option<&str>) -> Result<Option<i64>, KeysError> {
    let Some(s) = arg else {
        return Ok(None);
    };
    if let Ok(secs) = s.parse::<i64>() {
        return Ok(Some(secs));
    }
    parse_rfc3339(s)
        .map(|ms| Some(ms.div_euclid(1000)))
        .ok_or_else(|| {
            KeysError::invalid(
                "--expires-at",
                format!("expected an RFC 3339 timestamp or Unix seconds, got `{s}`"),
            )
        })
}

/// Run a `keys` or `teams` command.
pub async fn run(cmd: Command) -> ExitCode {
    if let Err(e) = config::load_dotenv() {
        return fail(&e.to_string());
    }
    let settings = match config::settings_from_env() {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    let store = match KeyStore::open_from_settings(&settings.process, SystemClock::shared()).await {
        Ok(s) => s,
        Err(e) => return fail(&e.to_string()),
    };
    let out = execute(&KeyAdmin::new(&store), cmd).await;
    store.close().await;
    match out {
        Ok(v) => match serde_json::to_string_pretty(&v) {
            Ok(text) => match writeln!(std::io::stdout(), "{text}") {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&e.to_string()),
            },
            Err(e) => fail(&e.to_string()),
        },
        Err(e) => fail(&e.to_string()),
    }
}

async fn execute(admin: &KeyAdmin<'_>, cmd: Command) -> Result<serde_json::Value, KeysError> {
    Ok(match cmd {
        Command::Keys(KeysCommand::Create {
            name,
            team,
            scopes,
            limits,
            budgets: b,
            expires_at: e,
        }) => {
            let c = admin
                .create_key(CreateKey {
                    name,
                    team_id: team,
                    scopes,
                    limits: limits.limits(),
                    budgets: budgets(&b)?,
                    expires_at: expires_at(e.as_deref())?,
                    metadata: None,
                })
                .await?;
            json!({"key": c.key, "secret": c.secret.expose()})
        }
        Command::Keys(KeysCommand::List { team, state }) => {
            let state = match state.as_deref() {
                None => None,
                Some(s) => Some(KeyState::parse(s).ok_or_else(|| {
                    KeysError::invalid("--state", format!("expected active|revoked, got `{s}`"))
                })?),
            };
            let keys = admin.list_keys(&KeyFilter { team, state }).await?;
            json!({ "data": keys })
        }
        Command::Keys(KeysCommand::Show { id }) => json!(admin.get_key(&id).await?),
        Command::Keys(KeysCommand::Rotate { id }) => {
            let c = admin.rotate_key(&id).await?;
            json!({"key": c.key, "secret": c.secret.expose()})
        }
        Command::Keys(KeysCommand::Revoke { id }) => json!(admin.revoke_key(&id).await?),
        Command::Teams(TeamsCommand::Create {
            name,
            id,
            limits,
            budgets: b,
        }) => {
            let team = admin
                .create_team(CreateTeam {
                    id,
                    name,
                    limits: limits.limits(),
                    budgets: budgets(&b)?,
                    metadata: None,
                })
                .await?;
            json!(team)
        }
        Command::Teams(TeamsCommand::List) => json!({ "data": admin.list_teams().await? }),
    })
}

fn fail(message: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "polygateway: {message}");
    ExitCode::FAILURE
}
