//! `libpagepilot_run.so`, the interposer `pagepilot run` loads with
//! `LD_PRELOAD`: it turns an unmodified program's file mappings into
//! pagepilot regions (docs/run.md).
