//! The `.env` file and the settings sources built on it: finding the file (the working
//! directory, then its parents, as `dotenvy` does), parsing it, loading it into the process
//! environment at start-up, and the source a reload re-reads.
//!
//! **Invariant:** an error about `.env` names the file and the line number, never the line:
//! a line that does not parse is usually a secret with a stray quote.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::env::settings_from_vars;
use super::problems::ConfigError;
use super::settings::Settings;

/// Where settings come from when a running gateway reloads: called once per reload.
pub type SettingsSource = Arc<dyn Fn() -> Result<Settings, ConfigError> + Send + Sync>;

/// The `.env` file of the working directory or of its nearest parent that has one.
fn find() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    cwd.ancestors()
        .map(|dir| dir.join(".env"))
        .find(|p| p.is_file())
}

/// The variables of a `.env` file's text, in file order (`${VAR}` references are expanded
/// from the process environment and earlier lines, as `dotenvy` does).
///
/// Errors: [`ConfigError::DotEnv`] naming `path` and the line that does not parse, by
/// number and column, without its content.
pub fn parse_dotenv(path: &Path, text: &[u8]) -> Result<Vec<(String, String)>, ConfigError> {
    let mut vars = Vec::new();
    for item in dotenvy::from_read_iter(text) {
        match item {
            Ok(kv) => vars.push(kv),
            Err(e) => return Err(describe(path, text, &e)),
        }
    }
    Ok(vars)
}

/// The error of a `.env` line, located without quoting it.
fn describe(path: &Path, text: &[u8], e: &dotenvy::Error) -> ConfigError {
    let message = match e {
        dotenvy::Error::LineParse(line, index) => {
            let first = line.lines().next().unwrap_or_default();
            let number = String::from_utf8_lossy(text)
                .lines()
                .position(|l| l == first || l.trim() == first.trim())
                .map(|n| format!("line {} ", n + 1))
                .unwrap_or_default();
            format!(
                "{number}does not parse (at character {} of the line; its content is not shown, as it may hold a secret)",
                index + 1
            )
        }
        dotenvy::Error::Io(io) => io.to_string(),
        dotenvy::Error::EnvVar(var) => var.to_string(),
        other => format!("{other}"),
    };
    ConfigError::DotEnv {
        path: path.display().to_string(),
        message,
    }
}

/// A `.env` file's path and its variables in file order.
type DotEnvFile = (PathBuf, Vec<(String, String)>);

/// The `.env` file in effect; none when there is none.
fn read_dotenv() -> Result<Option<DotEnvFile>, ConfigError> {
    let Some(path) = find() else {
        return Ok(None);
    };
    let text = std::fs::read(&path).map_err(|e| ConfigError::DotEnv {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let vars = parse_dotenv(&path, &text)?;
    Ok(Some((path, vars)))
}

/// Read `.env` (the working directory's, or the nearest parent's) into the process
/// environment; the process environment wins. A missing file is fine.
///
/// Errors: [`ConfigError::DotEnv`] naming the file and, for a malformed line, its number.
pub fn load_dotenv() -> Result<(), ConfigError> {
    let Some((path, _)) = read_dotenv()? else {
        return Ok(());
    };
    // Parsed above, so only I/O can fail here; dotenvy sets what the environment lacks.
    dotenvy::from_path(&path).map_err(|e| describe(&path, &[], &e))
}

/// A settings source that re-reads `.env` under the process environment as it was when
/// this was called — call it before [`load_dotenv`] so the environment it captures is the
/// real one: the process environment wins over `.env`, as at start-up, and a key removed
/// from `.env` is gone.
pub fn env_settings_source() -> SettingsSource {
    let base: Vec<(String, String)> = std::env::vars().collect();
    Arc::new(move || {
        let mut vars = std::collections::BTreeMap::new();
        if let Some((_, file)) = read_dotenv()? {
            vars.extend(file);
        }
        vars.extend(base.iter().cloned());
        settings_from_vars(vars)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_line_is_named_by_number_and_never_quoted() {
        let text =
            b"PGW_LISTEN=127.0.0.1:0\nLLM__OPENAI__1__API_KEY='sk-live-abc123\nPGW_LOG=info\n";
        let err = parse_dotenv(Path::new("/srv/.env"), text).unwrap_err();
        let shown = err.to_string();
        assert!(!shown.contains("sk-live-abc123"), "{shown}");
        assert!(
            shown.starts_with("cannot read /srv/.env: line 2 does not parse (at character"),
            "{shown}"
        );
    }

    #[test]
    fn a_good_file_gives_its_variables_in_order() {
        let vars = parse_dotenv(Path::new(".env"), b"# c\nA=1\nB=\"two words\"\n").unwrap();
        assert_eq!(
            vars,
            vec![
                ("A".to_string(), "1".to_string()),
                ("B".to_string(), "two words".to_string())
            ]
        );
    }
}
