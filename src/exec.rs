//! Running a compiled model inside the current process.
//!
//! [`LoadedModel::load`] writes the object of [`Artifacts`] to a private temporary
//! directory, links it into a shared library with the system C compiler
//! (`cc -shared -o model.so model.o`, or `$CC`), and opens it with `libloading`. The
//! runtime symbols the object imports (`nnefc_sgemm`, `nnefc_sgemm_packed_a`) stay
//! undefined in that library and resolve against the running executable, which must export
//! them: this package's `build.rs` links its binaries, tests, benches and examples with
//! `-rdynamic`, and [`load`](LoadedModel::load) references the runtime so it is linked
//! in. Runs go through `PREFIX_run_ex` (with the weights file when the model was compiled
//! with external weights), with a runtime `ThreadPool` after
//! [`set_threads`](LoadedModel::set_threads). A program outside this package that uses `exec` needs the same `-rdynamic` link
//! argument.
//!
//! This module does not compile models (see [`nnefc_compiler::session`]) and does not
//! sandbox them: the loaded code runs with the process's rights, like any linked library.

use nnefc_compiler::back::{Artifacts, ModelInterface};
use nnefc_compiler::ir::{DType, Tensor, TensorData};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Why a model could not be loaded or run.
#[derive(Debug)]
pub enum ExecError {
    /// Writing the object or creating the temporary directory failed.
    Io {
        /// What was being done.
        what: String,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The C compiler could not link the object into a shared library.
    Link(String),
    /// The shared library could not be opened, or lacks the model's symbols.
    Load(String),
    /// The inputs do not match the model's interface.
    Input(String),
    /// The compiled code returned a non-zero status.
    Run(nnefc_runtime::Error),
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::Io { what, source } => write!(f, "{what}: {source}"),
            ExecError::Link(m) => write!(f, "cannot link the model into a shared library: {m}"),
            ExecError::Load(m) => write!(f, "cannot load the compiled model: {m}"),
            ExecError::Input(m) => write!(f, "{m}"),
            ExecError::Run(e) => write!(f, "the model failed: {e}"),
        }
    }
}

impl std::error::Error for ExecError {}

type RunFn = unsafe extern "C" fn(
    usize,
    *const u8,
    *const *const u8,
    *const *mut u8,
    *mut u8,
    *const nnefc_runtime::Parallel,
) -> i32;

/// One 64-byte aligned block; the workspace is a vector of these so it is aligned to
/// `WORKSPACE_ALIGN` without unsafe allocation code.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Block([u8; 64]);

/// A compiled model loaded into this process, with its own workspace.
///
/// Each `LoadedModel` owns a workspace, so two of them (even of the same artifacts) can run
/// on two threads at once. It is `Send`; `run` takes `&mut self`.
pub struct LoadedModel {
    run: RunFn,
    info: *const nnefc_runtime::ModelInfo,
    interface: ModelInterface,
    workspace: Vec<Block>,
    /// The thread pool runs use (`None`: the calling thread only).
    pool: Option<nnefc_runtime::ThreadPool>,
    /// The weights file of a model compiled with external weights.
    weights: Option<nnefc_runtime::Weights>,
    // Declared last so it is dropped after the function pointers above are unusable.
    _library: libloading::Library,
}

// SAFETY: the compiled code keeps no state and writes only the workspace and the outputs
// passed to it (see `back` docs: reentrant); the descriptor pointer refers to immutable
// data inside the library, which lives as long as `self`.
unsafe impl Send for LoadedModel {}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh directory for the object and the shared library of one load; removed when
/// dropped (the loaded mapping stays valid after the file is unlinked).
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, ExecError> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "nnefc-exec-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|source| ExecError::Io {
            what: format!("creating {}", dir.display()),
            source,
        })?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Links `object` into the shared library `so` with the system C compiler.
pub fn link_shared(object: &Path, so: &Path) -> Result<(), ExecError> {
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.arg("-shared").arg("-o").arg(so).arg(object);
    if cfg!(target_os = "macos") {
        // Runtime symbols resolve against the executable at load time.
        cmd.args(["-undefined", "dynamic_lookup"]);
    } else {
        cmd.arg("-lm");
    }
    let out = cmd
        .output()
        .map_err(|e| ExecError::Link(format!("cannot run `{}`: {e}", cc.to_string_lossy())))?;
    if !out.status.success() {
        return Err(ExecError::Link(format!(
            "`{}` failed ({}):\n{}",
            cc.to_string_lossy(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// Makes sure the runtime's entry points are part of the executable, so the loaded library
/// can bind to them (with `-rdynamic` they are exported from it).
fn keep_runtime_linked() {
    std::hint::black_box(nnefc_runtime::nnefc_sgemm as *const ());
    std::hint::black_box(nnefc_runtime::nnefc_sgemm_packed_a as *const ());
    std::hint::black_box(nnefc_runtime::nnefc_sgemm_parallel as *const ());
    std::hint::black_box(nnefc_runtime::nnefc_sgemm_batch_parallel as *const ());
    std::hint::black_box(nnefc_runtime::nnefc_dwconv as *const ());
    std::hint::black_box(nnefc_runtime::nnefc_maxpool as *const ());
    std::hint::black_box(nnefc_runtime::nnefc_conv as *const ());
    std::hint::black_box(nnefc_runtime::nnefc_winograd_in as *const ());
    std::hint::black_box(nnefc_runtime::nnefc_winograd_out as *const ());
    std::hint::black_box(nnefc_runtime::nnefc_winograd_fused as *const ());
    std::hint::black_box(nnefc_runtime::nnefc_conv_pool as *const ());
}

impl LoadedModel {
    /// Links and loads the object of `artifacts`.
    pub fn load(artifacts: &Artifacts) -> Result<LoadedModel, ExecError> {
        keep_runtime_linked();
        let scratch = Scratch::new()?;
        let obj = scratch.0.join("model.o");
        let so = scratch.0.join("model.so");
        std::fs::write(&obj, &artifacts.object).map_err(|source| ExecError::Io {
            what: format!("writing {}", obj.display()),
            source,
        })?;
        link_shared(&obj, &so)?;
        // SAFETY: the library is an nnefc-compiled object; it has no initializers beyond
        // what the C toolchain adds for a shared object.
        let library =
            unsafe { libloading::Library::new(&so) }.map_err(|e| ExecError::Load(e.to_string()))?;
        let prefix = &artifacts.interface.prefix;
        // SAFETY: `PREFIX_run_ex` has this signature (the nnefc ABI).
        let run: RunFn = unsafe {
            *library
                .get::<RunFn>(format!("{prefix}_run_ex\0").as_bytes())
                .map_err(|e| ExecError::Load(format!("symbol {prefix}_run_ex: {e}")))?
        };
        let weights = match &artifacts.weights {
            Some(bytes) => Some(
                nnefc_runtime::Weights::from_bytes(bytes)
                    .map_err(|e| ExecError::Load(format!("the weights the compiler wrote: {e}")))?,
            ),
            None => None,
        };
        // SAFETY: `PREFIX_info` is a static `nnefc_runtime::ModelInfo`; we take its address.
        let info: *const nnefc_runtime::ModelInfo = unsafe {
            *library
                .get::<*const nnefc_runtime::ModelInfo>(format!("{prefix}_info\0").as_bytes())
                .map_err(|e| ExecError::Load(format!("symbol {prefix}_info: {e}")))?
        };
        let blocks = artifacts.interface.workspace_size.div_ceil(64);
        Ok(LoadedModel {
            run,
            info,
            interface: artifacts.interface.clone(),
            workspace: vec![Block([0; 64]); blocks],
            pool: None,
            weights,
            _library: library,
        })
    }

    /// Runs use `threads` workers (the calling thread included; 0 = all cores) from a
    /// pool of this model's own, or only the calling thread for 1. Outputs do not depend
    /// on the choice.
    pub fn set_threads(&mut self, threads: usize) -> Result<(), ExecError> {
        self.pool = None;
        let pool = nnefc_runtime::ThreadPool::new(threads).map_err(|source| ExecError::Io {
            what: "starting worker threads".into(),
            source,
        })?;
        let workers = pool.workers();
        if workers > 1 {
            self.pool = Some(pool);
        }
        let blocks = self.interface.workspace_size_for(workers).div_ceil(64);
        self.workspace = vec![Block([0; 64]); blocks];
        Ok(())
    }

    /// The `batch` argument of `PREFIX_run_ex` for `n` samples.
    fn batch_arg(&self, n: usize) -> usize {
        if self.interface.inputs.iter().any(|t| t.batched) {
            n
        } else {
            0
        }
    }

    /// The `weights` argument of `PREFIX_run_ex`: the file, or null when embedded.
    fn weights_ptr(&self) -> *const u8 {
        self.weights
            .as_ref()
            .map_or(std::ptr::null(), |w| w.as_bytes().as_ptr())
    }

    /// The pool's `nnefc_parallel` descriptor, `None` for serial runs.
    fn parallel(&self) -> Option<nnefc_runtime::Parallel> {
        self.pool.as_ref().map(|p| p.parallel())
    }

    /// Workers a run uses.
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, |p| p.workers())
    }

    /// The interface the compiler reported (names, dtypes, shapes, workspace size).
    pub fn interface(&self) -> &ModelInterface {
        &self.interface
    }

    /// The descriptor the object itself exports (`PREFIX_info`), as any user of the object
    /// sees it at run time.
    pub fn info(&self) -> &nnefc_runtime::ModelInfo {
        // SAFETY: the symbol points to static data in the library, which `self` keeps open.
        unsafe { &*self.info }
    }

    /// Zero-filled output tensors of the right dtypes and shapes, for [`run_into`].
    ///
    /// [`run_into`]: LoadedModel::run_into
    pub fn output_buffers(&self) -> Vec<Tensor> {
        self.output_buffers_for(1)
    }

    /// Output tensors for a run of `n` samples (with a run-time batch; otherwise the same
    /// as [`output_buffers`](LoadedModel::output_buffers)).
    pub fn output_buffers_for(&self, n: usize) -> Vec<Tensor> {
        self.interface
            .outputs
            .iter()
            .map(|t| Tensor::zeros(t.dtype, shape_at(t, n)))
            .collect()
    }

    /// Runs the model on `inputs` (in graph order) and returns the outputs.
    pub fn run(&mut self, inputs: &[Tensor]) -> Result<Vec<Tensor>, ExecError> {
        let mut outputs = self.output_buffers_for(samples(&self.interface.inputs, inputs));
        self.run_into(inputs, &mut outputs)?;
        Ok(outputs)
    }

    /// Runs the model writing into `outputs` (from [`output_buffers`]); allocates nothing.
    ///
    /// [`output_buffers`]: LoadedModel::output_buffers
    pub fn run_into(&mut self, inputs: &[Tensor], outputs: &mut [Tensor]) -> Result<(), ExecError> {
        let n = samples(&self.interface.inputs, inputs);
        check_tensors("input", &self.interface.inputs, inputs, n)?;
        check_tensors("output", &self.interface.outputs, outputs, n)?;
        let in_ptrs: Vec<*const u8> = inputs.iter().map(data_ptr).collect();
        let out_ptrs: Vec<*mut u8> = outputs.iter_mut().map(data_ptr_mut).collect();
        let ws = self.workspace.as_mut_ptr() as *mut u8;
        let par = self.parallel();
        let par_ptr = par_ptr(&par);
        // SAFETY: every pointer covers a tensor of the dtype and shape the model expects
        // (checked above), the workspace has workspace_size_for(workers) bytes aligned to
        // 64 (set_threads sized it), `par` is null or describes our live pool, and the
        // function has the nnefc ABI.
        let status = unsafe {
            (self.run)(
                self.batch_arg(n),
                self.weights_ptr(),
                in_ptrs.as_ptr(),
                out_ptrs.as_ptr(),
                ws,
                par_ptr,
            )
        };
        nnefc_runtime::check(status).map_err(ExecError::Run)
    }
}

/// The `par` argument of `PREFIX_run_ex`: the descriptor, or null for serial.
fn par_ptr(par: &Option<nnefc_runtime::Parallel>) -> *const nnefc_runtime::Parallel {
    par.as_ref()
        .map_or(std::ptr::null(), |p| p as *const nnefc_runtime::Parallel)
}

/// The shape `t` has in a run of `n` samples (`n` along axis 0 if it is batched).
fn shape_at(t: &nnefc_compiler::back::TensorInfo, n: usize) -> Vec<usize> {
    let mut s = t.shape.clone();
    if t.batched
        && let Some(d) = s.first_mut()
    {
        *d *= n;
    }
    s
}

/// The number of samples `inputs` hold: the leading extent of the first batched input
/// (1 for a model without a run-time batch, or when the inputs are malformed: the
/// shape check then reports them).
fn samples(expected: &[nnefc_compiler::back::TensorInfo], inputs: &[Tensor]) -> usize {
    expected
        .iter()
        .zip(inputs)
        .find(|(e, _)| e.batched)
        .and_then(|(_, t)| t.shape.first().copied())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

fn check_tensors(
    kind: &str,
    expected: &[nnefc_compiler::back::TensorInfo],
    got: &[Tensor],
    n: usize,
) -> Result<(), ExecError> {
    if expected.len() != got.len() {
        return Err(ExecError::Input(format!(
            "the model has {} {kind}s, {} given",
            expected.len(),
            got.len()
        )));
    }
    for (e, t) in expected.iter().zip(got) {
        let shape = shape_at(e, n);
        if e.dtype != t.dtype() || shape != t.shape || t.len() != shape.iter().product::<usize>() {
            let want = if e.batched {
                // One sample's shape with N ≥ 1 samples along axis 0.
                let rest: Vec<String> = e.shape.iter().skip(1).map(|d| d.to_string()).collect();
                format!(
                    "{}[N, {}] (N ≥ 1 samples of the run-time batch, the same N for every \
                     batched tensor)",
                    e.dtype,
                    rest.join(", ")
                )
            } else {
                format!("{}{:?}", e.dtype, e.shape)
            };
            return Err(ExecError::Input(format!(
                "{kind} `{}` must be {want}, got {}{:?}",
                e.name,
                t.dtype(),
                t.shape
            )));
        }
    }
    Ok(())
}

fn data_ptr(t: &Tensor) -> *const u8 {
    match &t.data {
        TensorData::F32(v) => v.as_ptr() as *const u8,
        TensorData::I32(v) => v.as_ptr() as *const u8,
        // bool is one byte, 0 or 1: the ABI's bool.
        TensorData::Bool(v) => v.as_ptr() as *const u8,
    }
}

fn data_ptr_mut(t: &mut Tensor) -> *mut u8 {
    match &mut t.data {
        TensorData::F32(v) => v.as_mut_ptr() as *mut u8,
        TensorData::I32(v) => v.as_mut_ptr() as *mut u8,
        TensorData::Bool(v) => v.as_mut_ptr() as *mut u8,
    }
}

/// A tensor of the given type filled with a deterministic pattern in `[-1, 1)` (f32),
/// small integers (i32) or alternating booleans, for benchmarking without an input file.
pub fn synthetic_input(dtype: DType, shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    // A fixed LCG keeps runs comparable and avoids denormals or all-zero fast paths.
    let mut s: u32 = 0x1234_5678;
    let mut next = move || {
        s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        s >> 8
    };
    match dtype {
        DType::F32 => Tensor::f32(
            shape.to_vec(),
            (0..n)
                .map(|_| next() as f32 / (1u32 << 23) as f32 - 1.0)
                .collect(),
        ),
        DType::I32 => Tensor::i32(
            shape.to_vec(),
            (0..n).map(|_| (next() % 4) as i32).collect(),
        ),
        DType::Bool => Tensor::bool(shape.to_vec(), (0..n).map(|i| i % 2 == 0).collect()),
    }
}

/// The profile hook's state: sums the time since the previous step into each step.
struct ProfileCtx {
    /// When the previous step ended (or the run started).
    last: std::time::Instant,
    /// Milliseconds per step, summed over the timed runs (and over the samples of a
    /// run-time batch, whose steps repeat once per sample).
    sums: Vec<f64>,
    /// Whether this run counts (warm-up runs do not).
    timed: bool,
}

unsafe extern "C" fn profile_hook(ctx: *mut std::ffi::c_void, step: usize) {
    // SAFETY: ctx is the ProfileCtx of `LoadedModel::profile`, alive during the run.
    let c = unsafe { &mut *(ctx as *mut ProfileCtx) };
    let now = std::time::Instant::now();
    if c.timed
        && let Some(s) = c.sums.get_mut(step)
    {
        *s += now.saturating_duration_since(c.last).as_secs_f64() * 1e3;
    }
    c.last = now;
}

type ProfiledFn = unsafe extern "C" fn(
    usize,
    *const u8,
    *const *const u8,
    *const *mut u8,
    *mut u8,
    *const nnefc_runtime::Parallel,
    unsafe extern "C" fn(*mut std::ffi::c_void, usize),
    *mut std::ffi::c_void,
) -> i32;

impl LoadedModel {
    /// Mean time of every step over `iterations` runs (after `warmup`), with the step
    /// table: needs an object compiled with `BackendOptions::profile`. With a run-time
    /// batch, times and flops are those of the whole batch.
    pub fn profile(
        &mut self,
        inputs: &[Tensor],
        warmup: usize,
        iterations: usize,
    ) -> Result<Vec<(nnefc_compiler::back::profile::StepInfo, f64)>, ExecError> {
        let n = samples(&self.interface.inputs, inputs);
        check_tensors("input", &self.interface.inputs, inputs, n)?;
        let prefix = self.interface.prefix.clone();
        // SAFETY: the symbols of a profiled object have these types (`back::profile`).
        let (run, table) = unsafe {
            let run: ProfiledFn = *self
                ._library
                .get::<ProfiledFn>(format!("{prefix}_run_profiled\0").as_bytes())
                .map_err(|_| {
                    ExecError::Load(format!(
                        "{prefix}_run_profiled is missing: compile with profiling on"
                    ))
                })?;
            let table: *const std::ffi::c_char = *self
                ._library
                .get::<*const std::ffi::c_char>(format!("{prefix}_profile_table\0").as_bytes())
                .map_err(|e| ExecError::Load(format!("{prefix}_profile_table: {e}")))?;
            (
                run,
                std::ffi::CStr::from_ptr(table)
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        // The table rates one sample; with a run-time batch a step runs once per sample.
        let mut steps = nnefc_compiler::back::profile::parse(&table);
        let runs_per_step = self.batch_arg(n).max(1) as f64;
        for s in &mut steps {
            s.flops *= runs_per_step;
        }
        let mut outputs = self.output_buffers_for(n);
        let in_ptrs: Vec<*const u8> = inputs.iter().map(data_ptr).collect();
        let out_ptrs: Vec<*mut u8> = outputs.iter_mut().map(data_ptr_mut).collect();
        let ws = self.workspace.as_mut_ptr() as *mut u8;
        let par = self.parallel();
        let par_ptr = par_ptr(&par);
        let now = std::time::Instant::now();
        let mut ctx = ProfileCtx {
            last: now,
            sums: vec![0f64; steps.len()],
            timed: false,
        };
        let runs = iterations.max(1);
        for it in 0..warmup + runs {
            ctx.timed = it >= warmup;
            ctx.last = std::time::Instant::now();
            // SAFETY: as in `run_into`; the hook only writes `ctx`, which outlives the call.
            let status = unsafe {
                run(
                    self.batch_arg(n),
                    self.weights_ptr(),
                    in_ptrs.as_ptr(),
                    out_ptrs.as_ptr(),
                    ws,
                    par_ptr,
                    profile_hook,
                    &mut ctx as *mut ProfileCtx as *mut std::ffi::c_void,
                )
            };
            nnefc_runtime::check(status).map_err(ExecError::Run)?;
        }
        let sums = ctx.sums;
        Ok(steps
            .into_iter()
            .zip(sums)
            .map(|(s, t)| (s, t / runs as f64))
            .collect())
    }
}

/// Timing of repeated runs, in milliseconds per inference.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Median over the timed iterations.
    pub median_ms: f64,
    /// Fastest iteration.
    pub min_ms: f64,
    /// Number of timed iterations.
    pub iterations: usize,
}

impl LoadedModel {
    /// Runs `warmup` untimed iterations, then times `iterations` runs one by one.
    pub fn time(
        &mut self,
        inputs: &[Tensor],
        warmup: usize,
        iterations: usize,
    ) -> Result<Timing, ExecError> {
        let mut outputs = self.output_buffers_for(samples(&self.interface.inputs, inputs));
        for _ in 0..warmup {
            self.run_into(inputs, &mut outputs)?;
        }
        let mut samples = Vec::with_capacity(iterations.max(1));
        for _ in 0..iterations.max(1) {
            let t = std::time::Instant::now();
            self.run_into(inputs, &mut outputs)?;
            samples.push(t.elapsed().as_secs_f64() * 1e3);
        }
        samples.sort_by(f64::total_cmp);
        Ok(Timing {
            median_ms: samples[samples.len() / 2],
            min_ms: samples[0],
            iterations: samples.len(),
        })
    }
}
