//! Optimization passes over the IR, and the pipeline that runs them.
//!
//! A pass is one file, with a stable kebab-case name, that rewrites a [`Graph`] in place
//! and reports whether it changed anything ([`Changed`]). The [`Pipeline`] runs passes in
//! the order written in [`default_pipeline`], verifies the graph before the first pass
//! and after every pass that reports a change (when `verify_each` is on, as in tests),
//! repeats the simplification group to a fixed point under an iteration limit, and can
//! skip passes by name. The registry ([`PASSES`]) is the only place pass names are
//! strings.
//!
//! Analyses that do not change the graph (memory planning) are plain functions, not
//! passes. Passes never call each other; shared helpers live in `ir`.

pub mod batch;
pub mod block;
pub mod const_fold;
pub mod dce;
pub mod epilogue;
pub mod fusion;
pub mod memory_plan;
pub mod simplify;

use crate::ir::Graph;
use std::fmt;

/// Whether a pass changed the graph. An enum, so `Ok(true)` cannot be misread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Changed {
    Yes,
    No,
}

impl Changed {
    pub fn or(self, other: Changed) -> Changed {
        if self == Changed::Yes || other == Changed::Yes {
            Changed::Yes
        } else {
            Changed::No
        }
    }
}

/// A pass failed: an internal inconsistency (the graph it was given broke an invariant it
/// relies on) or a verifier failure after it ran.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PassError {
    #[error("pass `{pass}`: {message}")]
    Internal { pass: &'static str, message: String },
    #[error("the graph is invalid after pass `{pass}`:\n{report}")]
    Verify { pass: &'static str, report: String },
    #[error("pass group `{group}` did not reach a fixed point in {limit} iterations")]
    NoFixedPoint { group: &'static str, limit: usize },
}

/// One graph-to-graph rewrite.
pub trait Pass {
    /// Stable kebab-case name, used in dumps and `--disable-pass`.
    fn name(&self) -> &'static str;
    fn run(&mut self, graph: &mut Graph) -> Result<Changed, PassError>;
}

/// Every pass with its one-line description, in pipeline order.
pub const PASSES: &[(&str, &str)] = &[
    (
        "const-fold",
        "evaluates nodes whose operands are all constants (small results only)",
    ),
    (
        "simplify",
        "algebraic identities: no-op copies/reshapes/transposes, batch norm folded into conv, transpose pairs",
    ),
    (
        "dce",
        "removes nodes and constants that no graph output depends on",
    ),
];

/// Options of the pipeline driver.
#[derive(Clone, Debug, Default)]
pub struct PassOptions {
    /// Run `ir::verify` before the first pass and after each pass that changed something.
    pub verify_each: bool,
    /// Names of passes to skip.
    pub disabled: Vec<String>,
    /// If set, called with (pass name, graph) after each pass that changed something.
    pub dump_after: bool,
}

/// What the pipeline did: per pass run, its name and whether it changed the graph, and
/// the graph text after it if `dump_after` was set.
#[derive(Clone, Debug, Default)]
pub struct PassReport {
    pub runs: Vec<(&'static str, Changed)>,
    pub dumps: Vec<(&'static str, String)>,
}

impl fmt::Display for PassReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, changed) in &self.runs {
            writeln!(
                f,
                "{name}: {}",
                if *changed == Changed::Yes {
                    "changed"
                } else {
                    "unchanged"
                }
            )?;
        }
        Ok(())
    }
}

enum Step {
    /// Repeat the passes until none changes anything (at most `limit` rounds).
    Fixpoint {
        group: &'static str,
        passes: Vec<Box<dyn Pass>>,
        limit: usize,
    },
}

/// An ordered list of passes and fixed-point groups.
pub struct Pipeline {
    steps: Vec<Step>,
}

/// The default optimization pipeline.
pub fn default_pipeline() -> Pipeline {
    Pipeline {
        steps: vec![Step::Fixpoint {
            group: "simplify",
            passes: vec![
                Box::new(const_fold::ConstFold::default()),
                Box::new(simplify::Simplify),
                Box::new(dce::Dce),
            ],
            limit: 16,
        }],
    }
}

impl Pipeline {
    /// Runs the pipeline on `graph`.
    pub fn run(&mut self, graph: &mut Graph, opts: &PassOptions) -> Result<PassReport, PassError> {
        let mut report = PassReport::default();
        if opts.verify_each {
            verify(graph, "input")?;
        }
        for step in &mut self.steps {
            match step {
                Step::Fixpoint {
                    group,
                    passes,
                    limit,
                } => {
                    let mut converged = false;
                    for _ in 0..*limit {
                        let mut any = Changed::No;
                        for p in passes.iter_mut() {
                            any = any.or(run_one(p.as_mut(), graph, opts, &mut report)?);
                        }
                        if any == Changed::No {
                            converged = true;
                            break;
                        }
                    }
                    if !converged {
                        return Err(PassError::NoFixedPoint {
                            group,
                            limit: *limit,
                        });
                    }
                }
            }
        }
        Ok(report)
    }
}

fn run_one(
    pass: &mut dyn Pass,
    graph: &mut Graph,
    opts: &PassOptions,
    report: &mut PassReport,
) -> Result<Changed, PassError> {
    let name = pass.name();
    if opts.disabled.iter().any(|d| d == name) {
        return Ok(Changed::No);
    }
    let changed = pass.run(graph)?;
    report.runs.push((name, changed));
    if changed == Changed::Yes {
        if opts.verify_each {
            verify(graph, name)?;
        }
        if opts.dump_after {
            report.dumps.push((name, crate::ir::print::print(graph)));
        }
    }
    Ok(changed)
}

fn verify(graph: &Graph, pass: &'static str) -> Result<(), PassError> {
    crate::ir::verify::verify(graph).map_err(|errors| PassError::Verify {
        pass,
        report: errors
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    })
}

/// Runs the default pipeline.
pub fn optimize(graph: &mut Graph, opts: &PassOptions) -> Result<PassReport, PassError> {
    default_pipeline().run(graph, opts)
}

#[cfg(test)]
mod tests;
