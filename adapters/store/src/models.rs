//! Models a person blocked from the models page: a router reads the list
//! (`GET /api/watchdog/models/blocked`) and routes away from them.
//!
//! Kept as one JSON row of `agentwatch_state` ([`BLOCKED_MODELS_KEY`]), read and written in one
//! immediate transaction, so two edits at once never lose one another and no migration is
//! needed.

use crate::{Store, StoreError, save_state};
use rusqlite::OptionalExtension;
use serde::{Deserialize, Serialize};

/// The `agentwatch_state` key of the blocked models.
pub const BLOCKED_MODELS_KEY: &str = "models.blocked";

/// The longest model or provider name kept, and the longest reason.
const MAX_NAME: usize = 200;
const MAX_REASON: usize = 500;

/// The most models blocked at once (each block is one person's click).
pub const MAX_BLOCKED: usize = 1_000;

/// One blocked model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedModel {
    /// `None`: the model under every provider.
    pub provider: Option<String>,
    pub model_id: String,
    pub blocked_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Why a block was refused.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for BlockError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Store(StoreError::Sql(e))
    }
}

fn parse(text: Option<String>) -> Vec<BlockedModel> {
    // An unreadable list is empty rather than an error: the next block writes a good one.
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

impl Store {
    /// The blocked models, oldest block first.
    pub fn blocked_models(&self) -> Result<Vec<BlockedModel>, StoreError> {
        Ok(parse(self.load_state(BLOCKED_MODELS_KEY)?))
    }

    /// Block `model` (a block already there keeps its time and takes the new reason). Returns
    /// whether it was new.
    pub fn block_model(&mut self, model: &BlockedModel) -> Result<bool, BlockError> {
        let bad = |m: &str| Err(BlockError::Invalid(m.to_owned()));
        if model.model_id.trim().is_empty() || model.model_id.len() > MAX_NAME {
            return bad("model_id: a model's name of 1 to 200 bytes");
        }
        if model.provider.as_ref().is_some_and(|p| p.len() > MAX_NAME) {
            return bad("provider: at most 200 bytes");
        }
        if model.reason.as_ref().is_some_and(|r| r.len() > MAX_REASON) {
            return bad("reason: at most 500 bytes");
        }
        self.edit_blocked(model.blocked_at, |list| {
            let same =
                |b: &BlockedModel| b.provider == model.provider && b.model_id == model.model_id;
            if let Some(old) = list.iter_mut().find(|b| same(b)) {
                old.reason.clone_from(&model.reason);
                return Ok(false);
            }
            if list.len() >= MAX_BLOCKED {
                return Err(BlockError::Invalid(format!(
                    "at most {MAX_BLOCKED} models are blocked at once: unblock one first"
                )));
            }
            list.push(model.clone());
            Ok(true)
        })
    }

    /// Unblock the model; returns whether it was blocked.
    pub fn unblock_model(
        &mut self,
        provider: Option<&str>,
        model_id: &str,
        now: i64,
    ) -> Result<bool, BlockError> {
        self.edit_blocked(now, |list| {
            let before = list.len();
            list.retain(|b| !(b.provider.as_deref() == provider && b.model_id == model_id));
            Ok(list.len() != before)
        })
    }

    /// Read, change and write the list in one immediate transaction.
    fn edit_blocked<T>(
        &mut self,
        now: i64,
        change: impl FnOnce(&mut Vec<BlockedModel>) -> Result<T, BlockError>,
    ) -> Result<T, BlockError> {
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let text: Option<String> = tx
            .query_row(
                "SELECT value FROM agentwatch_state WHERE key = ?1",
                [BLOCKED_MODELS_KEY],
                |r| r.get(0),
            )
            .optional()?;
        let mut list = parse(text);
        let result = change(&mut list)?;
        let json = serde_json::to_string(&list).unwrap_or_else(|_| "[]".to_owned());
        save_state(&tx, BLOCKED_MODELS_KEY, &json, now)?;
        tx.commit()?;
        Ok(result)
    }
}
