//! The jobs: each one tick (or one check) of a watchdog, over the store, a run lock and `now`.

pub mod deck;
pub mod recover;
pub mod sessions;
