//! Back end: IR graph → Cranelift loop nests → relocatable object, C header, Rust bindings.
//!
//! Stages (each its own module):
//! 1. `passes::memory_plan` gives every intermediate an arena offset ([`compile`] runs it;
//!    [`compile_with_plan`] takes one).
//! 2. [`select`] lowers each node to [`kernel::Kernel`]s (loop nests with affine
//!    accesses and an expression body) or runtime calls, in a [`kernel::Program`].
//! 3. [`schedule`] merges loops and picks the vector width (called from `select`).
//! 4. [`emit`] turns each kernel into a CLIF function; [`object`] adds weights as local
//!    read-only data (64-byte aligned) or, with `external_weights`, leaves them to the
//!    weights file ([`weights`]), adds the entry points and the descriptor, and writes
//!    the object with cranelift-object.
//! 5. [`header`] writes the C header and the Rust bindings from one [`ModelInterface`].
//!
//! The ABI (see `shared/docs/design.md`): `int PREFIX_run(const void *const *inputs,
//! void *const *outputs, void *workspace)`; tensors dense row-major; bool is one byte;
//! `workspace` holds `workspace_size` bytes aligned to 64. The code writes nothing but
//! `outputs` and `workspace`, allocates nothing and keeps no state, so calls are
//! reentrant. `int PREFIX_run_parallel(inputs, outputs, workspace, const nnefc_parallel
//! *par)` runs the same code with the caller's `parallel_for` (`nnefc_runtime::Parallel`;
//! null means serial); its workspace holds `workspace_size + (workers − 1) ·
//! worker_workspace` bytes. Outputs are bit-identical whatever the worker count: work is
//! split only over independent output ranges whose elements are computed by the same
//! instructions as in the serial run (`schedule`'s parallel loop role, the runtime's GEMM
//! parts).
//! `int PREFIX_run_ex(size_t batch, const void *weights, inputs, outputs, workspace, par)`
//! is the general form the other two call: `batch` 0 (the compiled batch), `weights` the
//! external weights file when the model was compiled with `external_weights` (see
//! [`weights`]; `nnefc_runtime::weights` has the format), ignored otherwise.
//!
//! What may be assumed of the input graph: it passes `ir::verify`, every extent is known,
//! every layout is row-major. Anything else is a typed [`CodegenError`], never a panic.
//!
//! # Adding an op
//! 1. In `select/<family>.rs`, write `fn my_op(lw: &mut Lowering, attrs.., ins, outs)` that
//!    builds one or more [`kernel::Kernel`]s: `lw.kernel(name, extents)` creates the loop
//!    nest, `k.access(buf, offset, strides)` describes how an operand is indexed from the
//!    loop indices (one stride per loop; use [`kernel::Indirect`] for data-dependent
//!    indices and `lw.const_buf` for index tables), `k.load`/`k.push` build the body,
//!    `k.set_store` the destination, `k.reduction` makes the inner loops a reduction, and
//!    `lw.push(k)` schedules and appends it. Scratch memory: `lw.scratch(dtype, len)`.
//! 2. Route the `Op` variant to it in `select::Lowering::node`.
//! 3. If the body needs a new scalar function, add it to `emit::expr` (and its vector
//!    form to `emit::math`, with a measured error bound, plus `expr::vectorizable`).
//! 4. Add a differential case in `back::tests` (compiled object vs `ir::interp`).
//!
//! # Windowed ops and fusion
//! `select::window` (pools, box, sample) and `select::conv` (conv, deconv, debox,
//! desample) make borders disappear first (a padded scratch copy), then emit affine loop
//! nests; zero-padded depthwise convs and `ignore`-border max pools instead split the
//! output into regions with the same in-bounds taps (no copy). A dense conv with a constant filter is im2col + the runtime's
//! GEMM (filter packed at compile time, in 6-row or, on AVX-512 targets where the shape
//! gains, 16-row lane panels: `select::linalg::a_packing`; bias per row). Epilogue fusion
//! happens in `select::conv`, not in a pass: when the conv's only user is the next node
//! and is `relu`, `clamp` with constant scalar bounds, or `add` of a same-shaped tensor
//! (optionally followed by relu/clamp), the GEMM epilogue applies it (the residual is
//! copied into the output first, then the GEMM accumulates) and those nodes are skipped
//! (`Lowering::skip`). Depthwise convs are direct f32x4 nests with the activation inline.
//!
//! # Cross targets
//! `BackendOptions::target` takes any triple Cranelift knows (x86_64/aarch64, Linux ELF or
//! macOS Mach-O; code is always PIC). An object for another architecture/OS than the host
//! cannot lean on `nnefc-runtime` (it is not built for those targets here), so by default
//! it is *self-contained*: GEMM steps become local register-blocked f32x4 functions
//! (`select::gemm_loops` → `kernel::Step::Tiled` → `emit::gemm`; fused conv epilogues
//! included). The host default keeps the runtime GEMM, which is 2–4× faster (it packs
//! and cache-blocks and uses the widest vectors; measured on a 2-vCPU Zen 4 VM, square
//! matmul with constant A: tiled ≈ 27 GFLOP/s at 64–256³ and ≈ 12 at 512³, runtime
//! ≈ 55–85 and ≈ 35). Force either with `BackendOptions::self_contained`.
//!
//! # Integer and data-dependent edge cases
//! Where the interpreter reports an error on *data* (not on the graph), compiled code
//! cannot: it has no error channel per element, and checking every element would cost a
//! compare and branch in the hottest loops. The choice is to compute a defined value and
//! return status 0, never to trap or read out of bounds:
//! * i32 `div` by zero gives 0, and `i32::MIN / −1` gives 0 (`emit::expr`; tested in
//!   `tests::int_bool`). A non-zero status was considered and rejected: it would need a
//!   sticky flag in the workspace written from inside vector loops for a case that
//!   well-formed models do not hit.
//! * i32 `add`/`sub`/`mul`/`neg`/`abs` wrap (two's complement); f32→i32 `cast` saturates
//!   (NaN → 0).
//! * data-dependent indices (`gather`, `sample`, ROI boxes, `batch_index`) are clamped into
//!   the indexed extent (`kernel::Indirect`).
//!
//! # NaN and infinity
//! IEEE-propagating everywhere, as NumPy and ONNX Runtime (the README's "choices" list has
//! the user-facing summary), and the same on every path: `ir::interp` (and so constant
//! folding), x86-64 and aarch64 code, and the runtime's GEMM epilogues. f32 `max`/`min`
//! (element-wise, `relu`, `clamp`, reductions, pools, fused conv epilogues) are IEEE
//! 754-2019 `maximum`/`minimum`: NaN if either operand is NaN. Emitted as one `fmax` on
//! aarch64 and as `maxps` plus `cmpunordps`/`orps` on x86 (`emit::math::Cx::fmax`; three
//! instructions instead of Cranelift's eight-instruction IEEE `fmax`); the one freedom is
//! a tie of +0 and −0, which may give either zero on x86 (`relu(−0)` is +0 everywhere).
//! `argmax`/`argmin` (reductions and `argmax_pool`) take the first NaN, as NumPy's
//! `argmax`. `sign(NaN)` is NaN, `sign(±0)` is ±0. The inline math (`emit::math`) gives
//! the interpreter's answers at NaN, ±∞ and huge finite values; its documented
//! limits (early `exp` overflow, `sin` beyond 8192, `log` of denormals) are in that
//! module. Exceptions: the
//! Winograd convolution turns ±∞ outputs into NaN (`select::winograd`), and f32 sums in
//! the code's order may overflow or cancel differently from the interpreter's f64 sums.
//! Tested value by value in `tests::special` (every path, aarch64 under qemu) and in the
//! runtime's `epilogues_propagate_nan_and_infinity`.
//!
//! # Element-wise fusion
//! `passes::fusion` groups f32 element-wise nodes (unary, binary, clamp, cast, batch norm)
//! whose intermediate results are read only inside the group, before memory planning:
//! the plan gives those intermediates no slot and keeps outside operands alive to the
//! root. `select::fuse` lowers each group as one kernel over the root's shape at the
//! root's position, outside operands read at their broadcast index. Groups avoid nodes a
//! conv epilogue may absorb and recompute smaller intermediates only for cheap ops; a
//! group whose operands a foreign plan (`compile_with_plan`) does not keep alive is
//! lowered node by node (details in `select::fuse`). Constant operands holding one value
//! become literals, and `pow` with a literal exponent of 1, 2 or 3 becomes
//! multiplications (`select::elementwise`).
//!
//! # Deconvolution
//! `select::deconv` lowers a deconv with a constant filter in sub-pixel form: one im2col of
//! the input, per stride phase GEMMs over only the taps that phase uses (filter blocks
//! packed at compile time, runtime calls shared across phases as batches), then a
//! bias + scatter kernel per phase. Other deconvs use the zero-insertion window in
//! `select::conv`.
//!
//! Not done here: layouts other than row-major, aliasing reshapes.

pub mod abi;
pub mod emit;
pub mod header;
pub mod kernel;
pub mod object;
pub mod profile;
pub mod schedule;
pub mod select;
pub mod weights;

#[cfg(test)]
mod tests;

use crate::ir::plan::MemoryPlan;
use crate::ir::{DType, Graph};

/// Cranelift optimization level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OptLevel {
    None,
    #[default]
    Speed,
    SpeedAndSize,
}

#[derive(Clone, Debug)]
pub struct BackendOptions {
    /// Target triple; `None` = the host, with the CPU features detected at compile time.
    pub target: Option<String>,
    /// Prefix of every symbol (`PREFIX_run`) and macro (`PREFIX_NUM_INPUTS`, uppercased).
    pub prefix: String,
    pub opt_level: OptLevel,
    /// Cranelift ISA flags or presets to enable (`x86-64-v3`, `has_avx2`, …). For an
    /// explicit x86-64 target with none given, `x86-64-v2` is used.
    pub cpu_features: Vec<String>,
    /// Emit f32x4 code where legal (off: scalar loops only; for testing the scalar path).
    pub vectorize: bool,
    /// Make the object call nothing outside itself (no `nnefc-runtime` GEMM): GEMMs
    /// become Cranelift loop nests and convolutions use direct loop nests. `None` = true
    /// exactly when `target` names another architecture or OS than the host (the runtime
    /// crate cannot be built for those here). See "Cross targets" above.
    pub self_contained: Option<bool>,
    /// Also export `PREFIX_run_profiled`, which calls a hook after every step, and the
    /// step table `PREFIX_profile_table` (see `profile`). Off: neither exists, and the
    /// other entry points are unchanged.
    pub profile: bool,
    /// Keep the constants out of the object: they go to a separate weights file
    /// ([`Artifacts::weights`]) that the caller passes to `PREFIX_run_ex` (see
    /// [`weights`]). Off: constants are read-only data in the object.
    pub external_weights: bool,
    /// Run-time batch: the graph is one sample, and the entry point runs it once per
    /// sample of the `batch` argument over the inputs and outputs marked here (which
    /// carry the batch along axis 0; `passes::batch` decides). `None`: a fixed batch.
    pub batch: Option<crate::passes::batch::RuntimeBatch>,
}

impl BackendOptions {
    /// Whether this compile produces a self-contained object (see [`Self::self_contained`]).
    pub fn is_self_contained(&self) -> bool {
        if let Some(b) = self.self_contained {
            return b;
        }
        match &self.target {
            None => false,
            Some(t) => match <target_lexicon::Triple as std::str::FromStr>::from_str(t) {
                Ok(tr) => {
                    let h = target_lexicon::Triple::host();
                    tr.architecture != h.architecture || tr.operating_system != h.operating_system
                }
                Err(_) => true,
            },
        }
    }
}

impl Default for BackendOptions {
    fn default() -> Self {
        BackendOptions {
            target: None,
            prefix: "model".into(),
            opt_level: OptLevel::Speed,
            cpu_features: Vec::new(),
            vectorize: true,
            self_contained: None,
            profile: false,
            external_weights: false,
            batch: None,
        }
    }
}

/// One input or output of the compiled model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub name: String,
    pub dtype: DType,
    /// The shape; with a run-time batch, of one sample (`shape[0]` is 1).
    pub shape: Vec<usize>,
    /// Carries the run-time batch along axis 0 (`BackendOptions::batch`).
    pub batched: bool,
}

impl TensorInfo {
    pub fn volume(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Names, dtypes and shapes of a model's inputs and outputs, in graph order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ModelInterface {
    pub prefix: String,
    pub inputs: Vec<TensorInfo>,
    pub outputs: Vec<TensorInfo>,
    /// Bytes of workspace for one worker.
    pub workspace_size: usize,
    /// Bytes each further worker adds (`PREFIX_WORKSPACE_PER_WORKER`).
    pub worker_workspace: usize,
    /// The object exports `PREFIX_run_profiled` and `PREFIX_profile_table`.
    pub profiled: bool,
    /// The external weights file the code reads (`None`: weights embedded).
    pub weights: Option<weights::WeightsInfo>,
}

impl ModelInterface {
    /// Bytes of workspace a run with `workers` workers needs (0 counts as 1).
    pub fn workspace_size_for(&self, workers: usize) -> usize {
        self.workspace_size
            .saturating_add(self.worker_workspace.saturating_mul(workers.max(1) - 1))
    }
}

/// Everything `compile` produces.
#[derive(Clone, Debug)]
pub struct Artifacts {
    pub object: Vec<u8>,
    pub header: String,
    pub rust: String,
    pub workspace_size: usize,
    pub interface: ModelInterface,
    /// The kernel program (for `nnefc dump --stage kernels`).
    pub kernels: String,
    /// The weights file, with `BackendOptions::external_weights`.
    pub weights: Option<Vec<u8>>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodegenError {
    #[error("unsupported: {0}")]
    Unsupported(String),
    #[error("extent not known at code generation: {0}")]
    UnknownShape(String),
    #[error("invalid graph: {0}")]
    Invalid(String),
    #[error("target: {0}")]
    Target(String),
    #[error("cranelift: {0}")]
    Cranelift(String),
    #[error("memory plan: {0}")]
    Plan(#[from] crate::passes::memory_plan::PlanError),
    #[error("internal error in the back end: {0}")]
    Internal(String),
}

fn interface(
    graph: &Graph,
    prefix: &str,
    workspace_size: usize,
    worker_workspace: usize,
) -> Result<ModelInterface, CodegenError> {
    let info = |v: crate::ir::ValueId, i: usize, kind: &str| -> Result<TensorInfo, CodegenError> {
        let val = graph
            .values
            .get(v.index())
            .ok_or_else(|| CodegenError::Invalid(format!("{kind} {i} refers to missing {v}")))?;
        let shape = val
            .ty
            .shape()
            .ok_or_else(|| CodegenError::UnknownShape(format!("{kind} {i}: {}", val.ty)))?;
        let name = val.name.clone().unwrap_or_else(|| format!("{kind}{i}"));
        Ok(TensorInfo {
            name,
            dtype: val.ty.dtype,
            shape,
            batched: false,
        })
    };
    let inputs = graph
        .inputs
        .iter()
        .enumerate()
        .map(|(i, v)| info(*v, i, "input"))
        .collect::<Result<_, _>>()?;
    let outputs = graph
        .outputs
        .iter()
        .enumerate()
        .map(|(i, v)| info(*v, i, "output"))
        .collect::<Result<_, _>>()?;
    Ok(ModelInterface {
        prefix: prefix.to_string(),
        inputs,
        outputs,
        workspace_size,
        worker_workspace,
        profiled: false,
        weights: None,
    })
}

fn check_prefix(p: &str) -> Result<(), CodegenError> {
    let ok = p
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(CodegenError::Invalid(format!(
            "prefix `{p}` is not a C identifier"
        )))
    }
}

/// Compiles a verified graph (plans memory first).
pub fn compile(graph: &Graph, opts: &BackendOptions) -> Result<Artifacts, CodegenError> {
    check_sizes(graph)?;
    let plan = crate::passes::memory_plan::plan(graph)?;
    compile_with_plan(graph, &plan, opts)
}

/// The kernel program of a graph, printed (`nnefc dump --stage kernels`).
pub fn kernels(
    graph: &Graph,
    plan: &MemoryPlan,
    opts: &BackendOptions,
) -> Result<kernel::Program, CodegenError> {
    Ok(program_and_weights(graph, plan, opts)?.0)
}

/// The kernel program, and with `external_weights` the weights file it reads.
fn program_and_weights(
    graph: &Graph,
    plan: &MemoryPlan,
    opts: &BackendOptions,
) -> Result<(kernel::Program, Option<(Vec<u8>, weights::WeightsInfo)>), CodegenError> {
    check_prefix(&opts.prefix)?;
    let self_contained = opts.is_self_contained();
    // AVX-512 is what makes the runtime's depthwise kernel and lane-panel GEMM worth a
    // call; self-contained objects call neither (and may be for any target).
    let avx512 = !self_contained && object::target_has_avx512(opts)?;
    let mut program = select::select_with(
        graph,
        plan,
        &opts.prefix,
        opts.vectorize,
        self_contained,
        opts.vectorize && avx512,
        avx512,
    )?;
    let file = opts
        .external_weights
        .then(|| weights::externalize(&mut program));
    Ok((program, file))
}

/// Compiles a verified graph with a given memory plan.
/// Every tensor must be addressable: its byte size fits in an `isize` (so element and
/// byte offsets computed anywhere in the back end cannot overflow).
fn check_sizes(graph: &Graph) -> Result<(), CodegenError> {
    for (i, v) in graph.values.iter().enumerate() {
        let bytes = v.ty.shape().and_then(|s| {
            s.iter()
                .try_fold(v.ty.dtype.size(), |acc, &d| acc.checked_mul(d))
                .filter(|&b| b <= isize::MAX as usize / 2)
        });
        if v.ty.is_fully_known() && bytes.is_none() {
            let name = v.name.clone().unwrap_or_else(|| format!("%v{i}"));
            return Err(CodegenError::Invalid(format!(
                "tensor `{name}` of type {} is too large to address",
                v.ty
            )));
        }
    }
    Ok(())
}

pub fn compile_with_plan(
    graph: &Graph,
    plan: &MemoryPlan,
    opts: &BackendOptions,
) -> Result<Artifacts, CodegenError> {
    check_sizes(graph)?;
    let (program, file) = program_and_weights(graph, plan, opts)?;
    let mut iface = interface(
        graph,
        &opts.prefix,
        program.workspace_size,
        program.worker_scratch,
    )?;
    iface.profiled = opts.profile;
    if let Some(rb) = &opts.batch {
        if rb.inputs.len() != iface.inputs.len() || rb.outputs.len() != iface.outputs.len() {
            return Err(CodegenError::Internal(
                "run-time batch marks do not match the graph's inputs and outputs".into(),
            ));
        }
        for (t, &b) in iface.inputs.iter_mut().zip(&rb.inputs) {
            t.batched = b;
        }
        for (t, &b) in iface.outputs.iter_mut().zip(&rb.outputs) {
            t.batched = b;
        }
    }
    iface.weights = file.as_ref().map(|f| f.1);
    let table = opts.profile.then(|| {
        let contraction: Vec<bool> = program
            .steps
            .iter()
            .map(kernel::Step::is_contraction)
            .collect();
        profile::table(graph, &program.step_nodes, &contraction)
    });
    let object = object::build(&program, &iface, opts, table.as_deref())?;
    Ok(Artifacts {
        object,
        header: header::c_header(&iface),
        rust: header::rust_bindings(&iface),
        workspace_size: program.workspace_size,
        interface: iface,
        kernels: program.to_string(),
        weights: file.map(|f| f.0),
    })
}
