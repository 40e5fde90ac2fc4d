//! SEQ's tests: one per rule, an es-like run, and a comparison with a plain
//! model written straight from the paper.

mod model;
mod rig;
mod rules;
