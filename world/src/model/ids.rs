//! Room and zone ids, the runtime's addressing: a room id is
//! `<zone>:<room>`, a private instance's zone id is `<template>#<n>`. The
//! one rule lives in `telos_proto::ids`, which every process (the store's
//! scripts' callers, the directory) reads; a game names its rooms by it.

pub use telos_proto::ids::*;
