//! Parameter sweeps: one spec names a grid of policy specs, one per
//! combination of its parameters' values (the SEQ paper's Figures 9 and 10).
//!
//! Syntax, in the registry's own `seq:L=50,M=20` form:
//! `POLICY:PARAM=VALUES[,PARAM=VALUES...]`, where `VALUES` is a
//! comma-separated list of items, each
//!
//! - an integer `v`,
//! - an inclusive range `a..b` (every integer from `a` to `b`),
//! - a range with a step `a..b:s` (`a`, `a+s`, ... up to `b`),
//! - a geometric range `a..b*f` (`a`, `a*f`, `a*f*f`, ... up to `b`).
//!
//! A comma item without `=` continues the previous parameter's list, so
//! `seq:L=2..8,16,32,M=20,50` sweeps L over 2-8, 16, 32 and M over 20, 50.
//! Several parameters form a grid; the first one named varies slowest.
//! Parameter names are matched without regard to case and reported as the
//! policy declares them ([`registry::parameters`]).

use pagepilot_policy::registry::{self, RegistryError, Setup};
use thiserror::Error;

/// Most points a sweep may expand to (parameter combinations, before sizes).
pub const MAX_POINTS: usize = 10_000;

/// Errors parsing or expanding a sweep spec, each naming what was wrong.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ParamSweepError {
    /// The spec names no parameter to vary.
    #[error("sweep `{spec}`: nothing to sweep; give POLICY:PARAM=VALUES, e.g. seq:L=2..64 ({})", known_text(.known))]
    NoParameter {
        /// The spec as given.
        spec: String,
        /// The policy's parameters.
        known: Vec<&'static str>,
    },
    /// The policy is not a built-in policy.
    #[error("sweep: unknown policy `{name}`; policies with parameters: {}", swept_policies().join(", "))]
    UnknownPolicy {
        /// The name given.
        name: String,
    },
    /// The policy does not take the parameter.
    #[error("sweep: policy `{policy}` has no parameter `{param}`; {}", known_text(.known))]
    UnknownParameter {
        /// The policy.
        policy: String,
        /// The parameter as given.
        param: String,
        /// The policy's parameters.
        known: Vec<&'static str>,
    },
    /// A parameter was named twice.
    #[error(
        "sweep: parameter `{param}` given twice; list its values in one place (`{param}=2,4,8`)"
    )]
    DuplicateParameter {
        /// The parameter.
        param: String,
    },
    /// A value item came before any `PARAM=`.
    #[error("sweep `{spec}`: `{item}` is not PARAM=VALUES")]
    NotAParameter {
        /// The spec as given.
        spec: String,
        /// The item.
        item: String,
    },
    /// A parameter has an empty value or an empty list item.
    #[error("sweep: parameter `{param}` has an empty value")]
    MissingValue {
        /// The parameter.
        param: String,
    },
    /// A number was not a non-negative integer.
    #[error("sweep: `{param}={item}`: `{text}` is not a non-negative integer")]
    BadNumber {
        /// The parameter.
        param: String,
        /// The value item.
        item: String,
        /// The part that is not a number.
        text: String,
    },
    /// A range's start lies above its end.
    #[error("sweep: `{param}={item}`: empty range (its start is above its end)")]
    EmptyRange {
        /// The parameter.
        param: String,
        /// The range.
        item: String,
    },
    /// A range's step was zero.
    #[error("sweep: `{param}={item}`: a step of zero")]
    ZeroStep {
        /// The parameter.
        param: String,
        /// The range.
        item: String,
    },
    /// A geometric range's factor was below 2 or its start zero.
    #[error("sweep: `{param}={item}`: a geometric range needs a factor of at least 2 and a start of at least 1")]
    BadFactor {
        /// The parameter.
        param: String,
        /// The range.
        item: String,
    },
    /// The grid is too large to run.
    #[error("sweep: {points} points (at most {MAX_POINTS}); use a step, e.g. L=2..512:8")]
    TooManyPoints {
        /// Points the spec expands to (at least).
        points: u128,
    },
    /// The policy refused a point of the grid.
    #[error("sweep point `{spec}`")]
    Rejected {
        /// The point's spec.
        spec: String,
        /// The registry's reason.
        source: RegistryError,
    },
}

fn known_text(known: &[&str]) -> String {
    if known.is_empty() {
        "it takes no parameters".into()
    } else {
        format!("its parameters: {}", known.join(", "))
    }
}

/// Built-in policies that take parameters.
fn swept_policies() -> Vec<&'static str> {
    registry::available()
        .into_iter()
        .filter(|n| registry::parameters(n).is_some_and(|p| !p.is_empty()))
        .collect()
}

/// One parameter and the values it takes, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Axis {
    /// The parameter, as the policy declares it.
    pub name: String,
    /// Its values, duplicates removed.
    pub values: Vec<u64>,
}

/// A parsed sweep: a policy and its parameters' values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSweep {
    /// The policy name, lower case.
    pub policy: String,
    /// The parameters, in the order given.
    pub axes: Vec<Axis>,
}

/// One point of the grid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Point {
    /// The point as a registry spec, e.g. `seq:L=8,M=20`.
    pub spec: String,
    /// Each parameter's value at this point, in the sweep's axis order.
    pub values: Vec<(String, u64)>,
}

impl ParamSweep {
    /// Parses a sweep spec (see the module documentation).
    pub fn parse(text: &str) -> Result<ParamSweep, ParamSweepError> {
        let (name, rest) = text.split_once(':').unwrap_or((text, ""));
        let policy = name.trim().to_ascii_lowercase();
        let known =
            registry::parameters(&policy).ok_or_else(|| ParamSweepError::UnknownPolicy {
                name: policy.clone(),
            })?;
        let mut axes: Vec<Axis> = Vec::new();
        for item in rest.split(',').map(str::trim) {
            match item.split_once('=') {
                Some((param, value)) => {
                    let param = param.trim();
                    let declared = known
                        .iter()
                        .find(|k| k.eq_ignore_ascii_case(param))
                        .ok_or_else(|| ParamSweepError::UnknownParameter {
                            policy: policy.clone(),
                            param: param.to_string(),
                            known: known.to_vec(),
                        })?;
                    if axes.iter().any(|a| a.name == *declared) {
                        return Err(ParamSweepError::DuplicateParameter {
                            param: declared.to_string(),
                        });
                    }
                    let mut axis = Axis {
                        name: declared.to_string(),
                        values: Vec::new(),
                    };
                    add_values(&mut axis, value.trim())?;
                    axes.push(axis);
                }
                None => match axes.last_mut() {
                    Some(axis) => add_values(axis, item)?,
                    None if item.is_empty() && rest.trim().is_empty() => {}
                    None => {
                        return Err(ParamSweepError::NotAParameter {
                            spec: text.to_string(),
                            item: item.to_string(),
                        })
                    }
                },
            }
        }
        if axes.is_empty() {
            return Err(ParamSweepError::NoParameter {
                spec: text.to_string(),
                known: known.to_vec(),
            });
        }
        let points = axes
            .iter()
            .fold(1u128, |n, a| n.saturating_mul(a.values.len() as u128));
        if points > MAX_POINTS as u128 {
            return Err(ParamSweepError::TooManyPoints { points });
        }
        Ok(ParamSweep { policy, axes })
    }

    /// The grid's points, the first axis varying slowest, each checked by
    /// the registry (a value the policy rejects is an error naming the point).
    pub fn points(&self) -> Result<Vec<Point>, ParamSweepError> {
        let mut points = vec![Vec::new()];
        for axis in &self.axes {
            points = points
                .into_iter()
                .flat_map(|done: Vec<(String, u64)>| {
                    axis.values.iter().map(move |&v| {
                        let mut next = done.clone();
                        next.push((axis.name.clone(), v));
                        next
                    })
                })
                .collect();
        }
        let setup = Setup {
            slots: 1,
            frames: 1,
            future: Some(&[0]),
        };
        points
            .into_iter()
            .map(|values| {
                let params: Vec<String> = values.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let spec = format!("{}:{}", self.policy, params.join(","));
                match registry::build(&spec, &setup) {
                    Ok(_) => Ok(Point { spec, values }),
                    Err(source) => Err(ParamSweepError::Rejected { spec, source }),
                }
            })
            .collect()
    }

    /// The first parameter that takes more than one value (the x axis of a
    /// plot against the parameter), or the first parameter.
    pub fn main_axis(&self) -> &Axis {
        self.axes
            .iter()
            .find(|a| a.values.len() > 1)
            .unwrap_or(&self.axes[0])
    }
}

/// Marks the rows of `points` (by their spec) with the point's parameter
/// values, for the report's parameter columns.
pub fn label_rows(points: &[Point], rows: &mut [crate::report::Row]) {
    for row in rows {
        if let Some(p) = points.iter().find(|p| p.spec == row.policy) {
            row.params = p.values.clone();
        }
    }
}

/// Appends the values of one list item (`v`, `a..b`, `a..b:s`, `a..b*f`).
fn add_values(axis: &mut Axis, item: &str) -> Result<(), ParamSweepError> {
    let param = axis.name.clone();
    if item.is_empty() {
        return Err(ParamSweepError::MissingValue { param });
    }
    let number = |text: &str| {
        text.trim()
            .parse::<u64>()
            .map_err(|_| ParamSweepError::BadNumber {
                param: param.clone(),
                item: item.to_string(),
                text: text.trim().to_string(),
            })
    };
    let Some((start, rest)) = item.split_once("..") else {
        push(axis, number(item)?);
        return Ok(());
    };
    let start = number(start)?;
    let (end, step) = if let Some((end, step)) = rest.split_once(':') {
        (number(end)?, Step::Add(number(step)?))
    } else if let Some((end, factor)) = rest.split_once('*') {
        (number(end)?, Step::Times(number(factor)?))
    } else {
        (number(rest)?, Step::Add(1))
    };
    let range_err = |make: fn(String, String) -> ParamSweepError| make(param.clone(), item.into());
    if start > end {
        return Err(range_err(|param, item| ParamSweepError::EmptyRange {
            param,
            item,
        }));
    }
    match step {
        Step::Add(0) => Err(range_err(|param, item| ParamSweepError::ZeroStep {
            param,
            item,
        })),
        Step::Add(s) => {
            let count = u128::from((end - start) / s) + 1;
            if count > MAX_POINTS as u128 {
                return Err(ParamSweepError::TooManyPoints { points: count });
            }
            for i in 0..count as u64 {
                push(axis, start + i * s);
            }
            Ok(())
        }
        Step::Times(f) if f < 2 || start == 0 => Err(range_err(|param, item| {
            ParamSweepError::BadFactor { param, item }
        })),
        Step::Times(f) => {
            let mut v = Some(start);
            while let Some(x) = v.filter(|&x| x <= end) {
                push(axis, x);
                v = x.checked_mul(f);
            }
            Ok(())
        }
    }
}

enum Step {
    Add(u64),
    Times(u64),
}

fn push(axis: &mut Axis, value: u64) {
    if !axis.values.contains(&value) {
        axis.values.push(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(text: &str) -> Vec<Vec<u64>> {
        let sweep = ParamSweep::parse(text).unwrap();
        sweep.axes.into_iter().map(|a| a.values).collect()
    }

    #[test]
    fn test_ranges_steps_factors_and_lists_expand_inclusively() {
        assert_eq!(values("seq:L=2..5"), vec![vec![2, 3, 4, 5]]);
        assert_eq!(values("seq:L=2..9:3"), vec![vec![2, 5, 8]]);
        assert_eq!(values("seq:L=2..64*2"), vec![vec![2, 4, 8, 16, 32, 64]]);
        assert_eq!(values("seq:L=7..7"), vec![vec![7]]);
        assert_eq!(
            values("seq:L=2..4,16,32,M=20,50"),
            vec![vec![2, 3, 4, 16, 32], vec![20, 50]]
        );
        assert_eq!(values("seq:l=3,3,4"), vec![vec![3, 4]]);
    }

    #[test]
    fn test_grid_varies_the_first_parameter_slowest_with_registry_specs() {
        let sweep = ParamSweep::parse("SEQ:L=20,50,m=20,50").unwrap();
        let specs: Vec<String> = sweep
            .points()
            .unwrap()
            .into_iter()
            .map(|p| p.spec)
            .collect();
        assert_eq!(
            specs,
            [
                "seq:L=20,M=20",
                "seq:L=20,M=50",
                "seq:L=50,M=20",
                "seq:L=50,M=50"
            ]
        );
        let sweep = ParamSweep::parse("seq:N=5,L=2..4").unwrap();
        assert_eq!(sweep.main_axis().name, "L");
        let point = &sweep.points().unwrap()[1];
        assert_eq!(point.values, [("N".to_string(), 5), ("L".to_string(), 3)]);
    }

    #[test]
    fn test_unknown_policy_and_parameter_are_named_with_what_is_known() {
        let err = ParamSweep::parse("sqe:L=2..4").unwrap_err();
        assert!(matches!(err, ParamSweepError::UnknownPolicy { .. }));
        assert!(err.to_string().contains("seq"), "{err}");
        let err = ParamSweep::parse("seq:Q=2..4").unwrap_err();
        assert!(matches!(err, ParamSweepError::UnknownParameter { .. }));
        assert!(err.to_string().contains("L, M, N, X"), "{err}");
        let err = ParamSweep::parse("fifo:L=2").unwrap_err();
        assert!(err.to_string().contains("takes no parameters"), "{err}");
    }

    #[test]
    fn test_empty_ranges_zero_steps_and_bad_numbers_are_refused() {
        let err = |text| ParamSweep::parse(text).unwrap_err();
        assert!(matches!(
            err("seq:L=64..2"),
            ParamSweepError::EmptyRange { .. }
        ));
        assert!(matches!(
            err("seq:L=2..64:0"),
            ParamSweepError::ZeroStep { .. }
        ));
        assert!(matches!(
            err("seq:L=2..64*1"),
            ParamSweepError::BadFactor { .. }
        ));
        assert!(matches!(
            err("seq:L=0..64*2"),
            ParamSweepError::BadFactor { .. }
        ));
        assert!(matches!(
            err("seq:L=2..x"),
            ParamSweepError::BadNumber { .. }
        ));
        assert!(matches!(err("seq:L=-1"), ParamSweepError::BadNumber { .. }));
        assert!(matches!(
            err("seq:L="),
            ParamSweepError::MissingValue { .. }
        ));
        assert!(matches!(
            err("seq:L=2,,4"),
            ParamSweepError::MissingValue { .. }
        ));
        assert!(matches!(err("seq"), ParamSweepError::NoParameter { .. }));
        assert!(matches!(
            err("seq:5"),
            ParamSweepError::NotAParameter { .. }
        ));
        assert!(matches!(
            err("seq:L=2,l=4"),
            ParamSweepError::DuplicateParameter { .. }
        ));
        assert!(matches!(
            err("seq:L=0..1000000000"),
            ParamSweepError::TooManyPoints { .. }
        ));
        assert!(matches!(
            err("seq:L=1..200,M=1..200"),
            ParamSweepError::TooManyPoints { .. }
        ));
        let text = err("seq:L=64..2").to_string();
        assert!(
            text.contains("L=64..2") && text.contains("empty range"),
            "{text}"
        );
    }

    #[test]
    fn test_a_value_the_policy_rejects_names_the_point() {
        let sweep = ParamSweep::parse("seq:N=0..2").unwrap();
        let err = sweep.points().unwrap_err();
        assert!(matches!(err, ParamSweepError::Rejected { .. }));
        let text = pagepilot_policy::chain(&err).to_string();
        assert!(
            text.contains("seq:N=0") && text.contains("between 1"),
            "{text}"
        );
    }
}
