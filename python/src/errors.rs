//! The gateway's errors → the package's exception tree (`polygateway/errors.py`). Each
//! error becomes `(kind, message, fields)` handed to `errors._from_native`, which picks the
//! class; the mapping of kinds to classes lives there, once. Messages are the gateway's own
//! `Display` text, which never quotes a credential.

use polygateway::GatewayError;
use polygateway::StartError;
use polygateway::config::ConfigError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple};

static FROM_NATIVE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The Python exception of `kind` with `message` and the attributes in `fields`.
fn exception(py: Python<'_>, kind: &str, message: &str, fields: &Bound<'_, PyDict>) -> PyErr {
    let made = FROM_NATIVE
        .import(py, "polygateway.errors", "_from_native")
        .and_then(|f| f.call1((kind, message, fields)));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

/// A call's error as the package's exception.
pub fn gateway_error(py: Python<'_>, e: &GatewayError) -> PyErr {
    match build(py, e) {
        Ok((kind, fields)) => exception(py, kind, &e.to_string(), &fields),
        Err(err) => err,
    }
}

fn build<'py>(py: Python<'py>, e: &GatewayError) -> PyResult<(&'static str, Bound<'py, PyDict>)> {
    let f = PyDict::new(py);
    match e {
        GatewayError::InvalidRequest { param, .. } => {
            f.set_item("param", param)?;
        }
        GatewayError::ModelNotFound { model, known } => {
            f.set_item("param", "model")?;
            f.set_item("model", model)?;
            f.set_item("known", known)?;
        }
        GatewayError::UpstreamRejected {
            source_name,
            status,
            code,
            ..
        } => {
            f.set_item("source_name", source_name)?;
            f.set_item("status", status)?;
            f.set_item("code", code)?;
        }
        GatewayError::ResultInvalid {
            source_name,
            structured,
            ..
        } => {
            f.set_item("source_name", source_name)?;
            if let Some(s) = structured {
                f.set_item("strategy", &s.strategy)?;
                f.set_item("raw_text", &s.raw_text)?;
                f.set_item("repair_error", &s.repair_error)?;
                f.set_item("validation_errors", PyList::new(py, &s.validation_errors)?)?;
                f.set_item("reasks", s.reasks)?;
            }
        }
        GatewayError::PluginFault { plugin, .. } => {
            f.set_item("plugin", plugin)?;
        }
        GatewayError::ScopeUnavailable {
            scope,
            reason,
            retry_after_s,
            per_source_reasons,
            ..
        } => {
            f.set_item("scope", scope)?;
            f.set_item("reason", reason.as_str())?;
            f.set_item("retry_after_s", retry_after_s)?;
            let per = PyDict::new(py);
            for (k, v) in per_source_reasons {
                per.set_item(k, v)?;
            }
            f.set_item("per_source_reasons", per)?;
        }
        GatewayError::DeadlineExceeded { deadline_s } => {
            f.set_item("deadline_s", deadline_s)?;
        }
        GatewayError::StreamInterrupted { source_name, .. } => {
            f.set_item("source_name", source_name)?;
        }
        GatewayError::ModelNotAllowed { key_id, model } => {
            f.set_item("key_id", key_id)?;
            f.set_item("model", model)?;
        }
        GatewayError::KeyRateLimited {
            owner,
            gate,
            retry_after_s,
        } => {
            f.set_item("owner", owner)?;
            f.set_item("gate", gate)?;
            f.set_item("retry_after_s", retry_after_s)?;
        }
        GatewayError::BudgetExceeded {
            owner,
            period,
            retry_after_s,
            ..
        } => {
            f.set_item("owner", owner)?;
            f.set_item("period", period)?;
            f.set_item("retry_after_s", retry_after_s)?;
        }
        GatewayError::Internal(_) => {}
    }
    Ok((e.kind(), f))
}

/// A start-up refusal as `ConfigError`, with `problems` as `(key, message)` pairs: every bad
/// key of the settings, or the file or key a component, telemetry or cache error names.
pub fn start_error(py: Python<'_>, e: &StartError) -> PyErr {
    let problems: Vec<(String, String)> = match e {
        StartError::Config(c) => config_problems(c),
        StartError::Source { key, message } => vec![(key.clone(), message.clone())],
        StartError::Plugin(_)
        | StartError::Telemetry(_)
        | StartError::Transport(_)
        | StartError::Cache(_)
        | StartError::Keys(_) => Vec::new(),
    };
    let made = (|| -> PyResult<Bound<'_, PyDict>> {
        let f = PyDict::new(py);
        let list = PyList::empty(py);
        for (k, m) in &problems {
            list.append(PyTuple::new(py, [k, m])?)?;
        }
        f.set_item("problems", list)?;
        Ok(f)
    })();
    match made {
        Ok(f) => exception(py, "config", &e.to_string(), &f),
        Err(err) => err,
    }
}

/// The `(key, message)` pairs of a configuration error.
fn config_problems(c: &ConfigError) -> Vec<(String, String)> {
    match c {
        ConfigError::Invalid(list) => list
            .iter()
            .map(|p| (p.key.clone(), p.message.clone()))
            .collect(),
        ConfigError::DotEnv { path, message } => vec![(path.clone(), message.clone())],
    }
}
