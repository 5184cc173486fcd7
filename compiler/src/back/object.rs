//! [`Program`] → relocatable object: ISA setup, read-only weight data, one local function
//! per kernel, the exported entry points `PREFIX_run_ex(batch, weights, inputs, outputs,
//! workspace, par)` (the steps), `PREFIX_run_parallel` and `PREFIX_run` (which call it
//! with nulls), `PREFIX_check_weights` for external weights, and the descriptor
//! `PREFIX_info`.
//!
//! Threads: the entry point computes the worker count from its `nnefc_parallel`
//! argument once; a kernel whose loop 0 is parallel is called through the caller's
//! `parallel_for` with `min(4·workers, E)` tasks (or directly, as one task, with one
//! worker); GEMM steps go through the runtime's `nnefc_sgemm_batch_parallel` (all the
//! products of a step in one call), which splits them itself and gives worker `w` the scratch at `GemmCall::scratch + w·worker_scratch`.
//!
//! Code is position independent (`is_pic`): imported runtime symbols go through the GOT,
//! so the object links into PIEs and shared libraries alike. No `.eh_frame` is written
//! (cranelift-object 0.135's uses absolute relocations that rust-lld rejects in PIEs).
//! Symbols are declared in program order and named from the prefix, so the same input
//! gives the same bytes. Not here: what the kernels compute (`select`, `emit`).

use super::abi::{self, Status};
use super::emit::math::Caps;
use super::emit::{KernelEmitter, gemm_params, kernel_params};
use super::kernel::{BufKind, Kernel, Program, Step};
use super::{BackendOptions, CodegenError, ModelInterface, OptLevel};
use crate::back::kernel::{BufId, Expansion, WindowOp};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I32;
use cranelift_codegen::ir::{
    AbiParam, Function, InstBuilder, MemFlagsData, Signature, UserFuncName, Value,
};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module, default_libcall_names};
use cranelift_object::{ObjectBuilder, ObjectModule};
use std::str::FromStr;

fn cl<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> CodegenError + '_ {
    move |e| CodegenError::Cranelift(format!("{what}: {e}"))
}

/// Builds the target ISA from the options (host with detected features by default).
pub(crate) fn make_isa(opts: &BackendOptions) -> Result<OwnedTargetIsa, CodegenError> {
    let mut sb = settings::builder();
    let level = match opts.opt_level {
        OptLevel::None => "none",
        OptLevel::Speed => "speed",
        OptLevel::SpeedAndSize => "speed_and_size",
    };
    sb.set("opt_level", level).map_err(cl("opt_level"))?;
    sb.set("is_pic", "true").map_err(cl("is_pic"))?;
    sb.set("log2_min_function_alignment", "4")
        .map_err(cl("alignment"))?;
    sb.set(
        "enable_verifier",
        if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        },
    )
    .map_err(cl("verifier"))?;
    let flags = settings::Flags::new(sb);
    let mut ib = match &opts.target {
        None => cranelift_native::builder().map_err(|e| CodegenError::Target(e.to_string()))?,
        Some(t) => {
            let triple = target_lexicon::Triple::from_str(t)
                .map_err(|e| CodegenError::Target(format!("{t}: {e}")))?;
            let mut b = cranelift_codegen::isa::lookup(triple.clone())
                .map_err(|e| CodegenError::Target(format!("{t}: {e}")))?;
            // SSE4.1 (x86-64-v2) is the floor: below it rounding ops become libm calls.
            if opts.cpu_features.is_empty()
                && matches!(triple.architecture, target_lexicon::Architecture::X86_64)
            {
                b.enable("x86-64-v2")
                    .map_err(|e| CodegenError::Target(format!("x86-64-v2: {e}")))?;
            }
            b
        }
    };
    for f in &opts.cpu_features {
        ib.enable(f)
            .map_err(|e| CodegenError::Target(format!("cpu feature `{f}`: {e}")))?;
    }
    ib.finish(flags)
        .map_err(|e| CodegenError::Target(e.to_string()))
}

/// Whether the target ISA (the host's, or the `--target`/`--cpu-features` given) has
/// AVX-512F: what makes the runtime's depthwise kernel worth a call.
pub(crate) fn target_has_avx512(opts: &BackendOptions) -> Result<bool, CodegenError> {
    let isa = make_isa(opts)?;
    Ok(isa
        .isa_flags()
        .iter()
        .any(|f| f.name == "has_avx512f" && f.as_bool() == Some(true)))
}

struct Ctx {
    module: ObjectModule,
    consts: Vec<DataId>,
    caps: Caps,
    fctx: FunctionBuilderContext,
}

/// Emits the object bytes.
pub(crate) fn build(
    program: &Program,
    iface: &ModelInterface,
    opts: &BackendOptions,
    profile_table: Option<&str>,
) -> Result<Vec<u8>, CodegenError> {
    let isa = make_isa(opts)?;
    let caps = Caps {
        fma: isa.has_native_fma(),
        x86: matches!(
            isa.triple().architecture,
            target_lexicon::Architecture::X86_64
        ),
    };
    let mut ob = ObjectBuilder::new(
        isa,
        opts.prefix.as_bytes().to_vec(),
        default_libcall_names(),
    )
    .map_err(cl("object builder"))?;
    ob.per_function_section(true);
    let module = ObjectModule::new(ob);
    let mut cx = Ctx {
        module,
        consts: Vec::new(),
        caps,
        fctx: FunctionBuilderContext::new(),
    };

    for (i, bytes) in program.consts.iter().enumerate() {
        let id = cx
            .module
            .declare_data(
                &format!("{}_w{i}", opts.prefix),
                Linkage::Local,
                false,
                false,
            )
            .map_err(cl("declare weight"))?;
        let mut dd = DataDescription::new();
        // An empty tensor still gets one byte so the symbol has an address.
        dd.define(if bytes.is_empty() {
            vec![0u8].into_boxed_slice()
        } else {
            bytes.clone().into_boxed_slice()
        });
        dd.set_align(64);
        cx.module
            .define_data(id, &dd)
            .map_err(cl("define weight"))?;
        cx.consts.push(id);
    }

    // Kernels first (local), then the entry point that calls them in order.
    let mut kernel_ids = Vec::new();
    for step in &program.steps {
        match step {
            Step::Kernel(k) => kernel_ids.push(Some(define_kernel(&mut cx, program, k)?)),
            Step::Gemm(_) | Step::Window(_) | Step::Block(_) => kernel_ids.push(None),
            Step::Tiled { name, gemm } => {
                kernel_ids.push(Some(define_tiled(&mut cx, program, name, gemm)?))
            }
        }
    }
    // Consecutive parallel kernels of one node over the same loop-0 extent (a depthwise
    // conv's regions) run as one task function: one fork-join, and each worker takes the
    // same channels of every region.
    let groups = parallel_groups(program);
    let mut group_fns = Vec::with_capacity(groups.len());
    for (gi, g) in groups.iter().enumerate() {
        group_fns.push(if g.len() > 1 {
            Some(define_group(
                &mut cx,
                program,
                &kernel_ids,
                g.clone(),
                &opts.prefix,
                gi,
            )?)
        } else {
            None
        });
    }
    let groups: Vec<(std::ops::Range<usize>, Option<FuncId>)> =
        groups.into_iter().zip(group_fns).collect();
    if let Some(text) = profile_table {
        let id = cx
            .module
            .declare_data(
                &format!("{}_profile_table", opts.prefix),
                Linkage::Export,
                false,
                false,
            )
            .map_err(cl("declare profile table"))?;
        let mut dd = DataDescription::new();
        let mut bytes = text.as_bytes().to_vec();
        bytes.push(0);
        dd.define(bytes.into_boxed_slice());
        cx.module
            .define_data(id, &dd)
            .map_err(cl("define profile table"))?;
    }
    define_entry(&mut cx, program, &kernel_ids, &groups, opts, iface)?;
    abi::define_info(&mut cx.module, iface)?;
    let product = cx.module.finish();
    product.emit().map_err(cl("emit object"))
}

/// The runs of steps that share one fork-join: consecutive parallel kernels of one node
/// (`Program::step_nodes`) with the same loop-0 extent, so that task `t` of every member
/// covers the same iterations. Every parallel kernel is in exactly one run (alone if
/// nothing joins it).
fn parallel_groups(program: &Program) -> Vec<std::ops::Range<usize>> {
    let kernel = |si: usize| match &program.steps[si] {
        Step::Kernel(k) if is_parallel(k) => Some(k),
        _ => None,
    };
    let key = |si: usize| {
        kernel(si).map(|k| {
            (
                k.loops[0].extent,
                program.step_nodes.get(si).copied().unwrap_or(usize::MAX),
            )
        })
    };
    let mut groups = Vec::new();
    let mut si = 0;
    while si < program.steps.len() {
        let Some(kk) = key(si) else {
            si += 1;
            continue;
        };
        let mut end = si + 1;
        while end < program.steps.len()
            && key(end) == Some(kk)
            && (si..end).all(|m| match (kernel(m), kernel(end)) {
                (Some(a), Some(b)) => no_cross_task_dependency(program, a, b),
                _ => false,
            })
        {
            end += 1;
        }
        groups.push(si..end);
        si = end;
    }
    groups
}

/// Whether kernel `b` may run right after kernel `a` inside the same task (no barrier
/// between them): wherever one writes memory the other touches, both access the same
/// buffer slab by slab along loop 0 (iteration `i` stays within `[i·s, (i+1)·s)` of the
/// same stride `s`), so task `t` of `b` only meets what task `t` of `a` touched.
pub(crate) fn no_cross_task_dependency(program: &Program, a: &Kernel, b: &Kernel) -> bool {
    let (Some(sa), Some(sb)) = (
        a.accesses.get(a.store.0 as usize),
        b.accesses.get(b.store.0 as usize),
    ) else {
        return false;
    };
    let conflict_free =
        |w: &super::kernel::Access, wk: &Kernel, x: &super::kernel::Access, xk: &Kernel| {
            if !overlapping(program, w.buf, x.buf) {
                return true;
            }
            w.buf == x.buf && slab(wk, w).is_some() && slab(wk, w) == slab(xk, x)
        };
    b.accesses.iter().all(|x| conflict_free(sa, a, x, b))
        && a.accesses.iter().all(|x| conflict_free(sb, b, x, a))
}

/// `(stride, slab)` when every loop-0 iteration `i` of `k` touches, through `x`, only
/// elements of slab `slab + i` of size `stride`; `None` when that cannot be shown.
fn slab(k: &Kernel, x: &super::kernel::Access) -> Option<(i64, i64)> {
    let s0 = *x.strides.first()?;
    if s0 <= 0 || !x.indirect.is_empty() {
        return None;
    }
    let (mut lo, mut hi) = (x.offset, x.offset);
    for (l, st) in k.loops.iter().zip(&x.strides).skip(1) {
        let span = st.checked_mul(l.extent.saturating_sub(1) as i64)?;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    (lo.div_euclid(s0) == hi.div_euclid(s0)).then_some((s0, lo.div_euclid(s0)))
}

/// Whether two buffers may share bytes: the same buffer, or workspace ranges that meet.
fn overlapping(program: &Program, a: super::kernel::BufId, b: super::kernel::BufId) -> bool {
    if a == b {
        return true;
    }
    match (program.buffer(a), program.buffer(b)) {
        (Some(x), Some(y)) => match (x.kind, y.kind) {
            (BufKind::Workspace(p), BufKind::Workspace(q)) => {
                let end = |o: usize, buf: &super::kernel::Buffer| o + buf.len * buf.dtype.size();
                p < end(q, y) && q < end(p, x)
            }
            _ => x.kind == y.kind,
        },
        _ => true,
    }
}

/// Word offsets of each member's sub-context in a group's task context (`n`, then the
/// kernel's buffer pointers), and the total words.
fn group_ctx_offsets(program: &Program, g: std::ops::Range<usize>) -> (Vec<usize>, usize) {
    let mut offs = Vec::with_capacity(g.len());
    let mut words = 0;
    for si in g {
        if let Step::Kernel(k) = &program.steps[si] {
            offs.push(words);
            words += 1 + kernel_params(program, k).len();
        }
    }
    (offs, words)
}

/// The task function of a group: `(ctx, task, worker)` calling every member kernel with
/// its sub-context, in step order.
fn define_group(
    cx: &mut Ctx,
    program: &Program,
    kernels: &[Option<FuncId>],
    g: std::ops::Range<usize>,
    prefix: &str,
    gi: usize,
) -> Result<FuncId, CodegenError> {
    let ptr = cx.module.target_config().pointer_type();
    let mut sig = cx.module.make_signature();
    for _ in 0..3 {
        sig.params.push(AbiParam::new(ptr));
    }
    let name = format!("{prefix}_group{gi}");
    let id = cx
        .module
        .declare_function(&name, Linkage::Local, &sig)
        .map_err(cl("declare group"))?;
    let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    let (offs, _) = group_ctx_offsets(program, g.clone());
    let mut members = Vec::new();
    for si in g {
        let k = kernels
            .get(si)
            .copied()
            .flatten()
            .ok_or_else(|| CodegenError::Internal("group member without a function".into()))?;
        members.push(cx.module.declare_func_in_func(k, &mut func));
    }
    {
        let mut b = FunctionBuilder::new(&mut func, &mut cx.fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let psize = i64::from(ptr.bytes());
        for (f, off) in members.into_iter().zip(offs) {
            let sub = b.ins().iadd_imm_s(p[0], off as i64 * psize);
            b.ins().call(f, &[sub, p[1], p[2]]);
        }
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(cx.module.target_config());
    }
    define_function(cx, id, func, || name.clone())?;
    Ok(id)
}

/// Whether `k` runs as parallel tasks (see [`define_kernel`]).
fn is_parallel(k: &Kernel) -> bool {
    k.loops.first().is_some_and(|l| l.parallel)
}

/// A kernel function. A serial kernel takes one pointer per non-constant buffer
/// ([`kernel_params`]). A parallel kernel has the `nnefc_parallel` task signature
/// `(ctx, task, worker)`: `ctx` holds the task count `n` followed by the buffer pointers,
/// and the task runs iterations `[task·E/n, (task+1)·E/n)` of loop 0 (extent `E`).
fn define_kernel(cx: &mut Ctx, program: &Program, k: &Kernel) -> Result<FuncId, CodegenError> {
    let ptr = cx.module.target_config().pointer_type();
    let params = kernel_params(program, k);
    let parallel = is_parallel(k);
    let mut sig = cx.module.make_signature();
    let nparams = if parallel { 3 } else { params.len() };
    for _ in 0..nparams {
        sig.params.push(AbiParam::new(ptr));
    }
    let id = cx
        .module
        .declare_function(&k.name, Linkage::Local, &sig)
        .map_err(cl("declare kernel"))?;
    let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    // Data symbols this kernel reads.
    let mut gvs = Vec::new();
    for a in &k.accesses {
        if let Some(BufKind::Const(c)) = program.buffer(a.buf).map(|b| b.kind)
            && !gvs.iter().any(|(x, _)| *x == c)
        {
            let did = *cx
                .consts
                .get(c)
                .ok_or_else(|| CodegenError::Internal(format!("constant {c} missing")))?;
            gvs.push((c, cx.module.declare_data_in_func(did, &mut func)));
        }
    }
    {
        let mut b = FunctionBuilder::new(&mut func, &mut cx.fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let mut pvals: Vec<Value> = b.block_params(entry).to_vec();
        let mut par = None;
        if parallel {
            let (ctx, task) = (pvals[0], pvals[1]);
            let flags = MemFlagsData::new().with_notrap();
            let psize = i32::from(ptr.bytes() as u8);
            let n = b.ins().load(ptr, flags, ctx, 0);
            pvals = (0..params.len())
                .map(|j| b.ins().load(ptr, flags, ctx, psize * (1 + j as i32)))
                .collect();
            let e = k.loops[0].extent as i64;
            let lo = b.ins().imul_imm_s(task, e);
            let lo = b.ins().udiv(lo, n);
            let hi = b.ins().iadd_imm_s(task, 1);
            let hi = b.ins().imul_imm_s(hi, e);
            let hi = b.ins().udiv(hi, n);
            let count = b.ins().isub(hi, lo);
            par = Some((lo, count));
        }
        let mut bases: Vec<Value> = Vec::with_capacity(k.accesses.len());
        let mut dtypes = Vec::with_capacity(k.accesses.len());
        let all_dtypes: Vec<crate::ir::DType> = k
            .accesses
            .iter()
            .map(|a| {
                program
                    .buffer(a.buf)
                    .map_or(crate::ir::DType::F32, |b| b.dtype)
            })
            .collect();
        let (rep, extra) = super::emit::shared_pointers(k, &all_dtypes);
        for (ai, a) in k.accesses.iter().enumerate() {
            let buf = program
                .buffer(a.buf)
                .ok_or_else(|| CodegenError::Internal(format!("buffer b{} missing", a.buf.0)))?;
            let base = match buf.kind {
                BufKind::Const(c) => {
                    let gv = gvs
                        .iter()
                        .find(|(x, _)| *x == c)
                        .map(|(_, g)| *g)
                        .ok_or_else(|| CodegenError::Internal("gv".into()))?;
                    b.ins().symbol_value(ptr, gv)
                }
                _ => {
                    let i = params
                        .iter()
                        .position(|p| *p == a.buf)
                        .ok_or_else(|| CodegenError::Internal("param".into()))?;
                    pvals[i]
                }
            };
            let off = a.offset * buf.dtype.size() as i64;
            let r = rep[ai];
            bases.push(if r < ai {
                bases[r]
            } else if off != 0 {
                b.ins().iadd_imm_s(base, off)
            } else {
                base
            });
            dtypes.push(buf.dtype);
        }
        let mut em = KernelEmitter {
            b: &mut b,
            kernel: k,
            caps: cx.caps,
            dtypes,
            ptr,
            par,
            rep,
            extra,
        };
        em.emit(&bases)?;
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(cx.module.target_config());
    }
    define_function(cx, id, func, || format!("kernel {}", k.name))?;
    Ok(id)
}

/// A local function computing a whole GEMM step with `emit::gemm` (self-contained objects).
fn define_tiled(
    cx: &mut Ctx,
    program: &Program,
    name: &str,
    g: &super::kernel::GemmCall,
) -> Result<FuncId, CodegenError> {
    let ptr = cx.module.target_config().pointer_type();
    let params = gemm_params(program, g);
    let mut sig = cx.module.make_signature();
    for _ in &params {
        sig.params.push(AbiParam::new(ptr));
    }
    let id = cx
        .module
        .declare_function(name, Linkage::Local, &sig)
        .map_err(cl("declare tiled gemm"))?;
    let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    {
        let mut b = FunctionBuilder::new(&mut func, &mut cx.fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let pvals: Vec<Value> = b.block_params(entry).to_vec();
        let base = |b: &mut FunctionBuilder<'_>, bid| -> Result<Value, CodegenError> {
            let buf = program
                .buffer(bid)
                .ok_or_else(|| CodegenError::Internal(format!("buffer b{} missing", bid.0)))?;
            match buf.kind {
                BufKind::Const(c) => {
                    let did = *cx
                        .consts
                        .get(c)
                        .ok_or_else(|| CodegenError::Internal(format!("constant {c} missing")))?;
                    let gv = cx.module.declare_data_in_func(did, b.func);
                    Ok(b.ins().symbol_value(ptr, gv))
                }
                _ => params
                    .iter()
                    .position(|p| *p == bid)
                    .and_then(|i| pvals.get(i).copied())
                    .ok_or_else(|| CodegenError::Internal("gemm param".into())),
            }
        };
        let ptrs = super::emit::gemm::GemmPtrs {
            a: base(&mut b, g.a.buf)?,
            b: base(&mut b, g.b.buf)?,
            c: base(&mut b, g.c.buf)?,
            bias: match g.bias {
                Some(x) => Some(base(&mut b, x)?),
                None => None,
            },
            row_bias: match &g.epi.row_bias {
                Some((x, _)) => Some(base(&mut b, *x)?),
                None => None,
            },
        };
        super::emit::gemm::emit(&mut b, g, &ptrs, cx.caps, ptr)?;
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(cx.module.target_config());
    }
    define_function(cx, id, func, || format!("tiled gemm {name}"))?;
    Ok(id)
}

/// Byte size of the runtime's `GemmArgs` (13 pointer-sized fields, checked by a test).
const GEMM_ARGS_SIZE: u32 = 13 * 8;
/// Byte size of the runtime's `GemmEpilogue` (checked by a test).
const EPILOGUE_SIZE: u32 = 32;
/// Bytes of the runtime's `DwArgs` on a 64-bit target: 27 words and two f32.
const DW_ARGS_SIZE: u32 = 27 * 8 + 8;
/// `nnefc_runtime::ConvArgs`: the depthwise record, then the input channel count and the
/// filter and bias strides between groups.
const CONV_ARGS_SIZE: u32 = DW_ARGS_SIZE + 24;
/// `nnefc_runtime::ConvPoolArgs`: the conv's record, then the pool's depthwise record.
const CONV_POOL_ARGS_SIZE: u32 = CONV_ARGS_SIZE + DW_ARGS_SIZE;
/// `nnefc_runtime::WinogradBandArgs`: a `ConvArgs`, a `DwArgs`, then the band, the
/// scratch and its stride per worker (checked by a test).
const WINOGRAD_BAND_ARGS_SIZE: u32 = CONV_ARGS_SIZE + DW_ARGS_SIZE + 24;
/// `nnefc_runtime::BlockArgs`: 42 words, then six f32 clamp bounds (checked by a test).
const BLOCK_ARGS_SIZE: u32 = 42 * 8 + 24;
/// Most products one `nnefc_sgemm_batch_parallel` call takes (bounds the entry point's
/// stack: 64 · 136 bytes).
pub(crate) const BATCH_CHUNK: usize = 64;
/// Byte offsets in the runtime's `Parallel`: pool, workers, parallel_for.
const PAR_POOL: i32 = 0;
const PAR_WORKERS: i32 = 8;
const PAR_FOR: i32 = 16;
/// Tasks per worker for a parallel kernel: a few more tasks than workers let a worker that
/// was descheduled (a shared machine) fall behind without idling the others.
const TASKS_PER_WORKER: i64 = 4;

/// `PREFIX_run_parallel(inputs, outputs, workspace, par)` and `PREFIX_run(inputs, outputs,
/// workspace)`, which calls it with a null `par`.
fn define_entry(
    cx: &mut Ctx,
    program: &Program,
    kernels: &[Option<FuncId>],
    groups: &[(std::ops::Range<usize>, Option<FuncId>)],
    opts: &BackendOptions,
    iface: &ModelInterface,
) -> Result<(), CodegenError> {
    let ptr = cx.module.target_config().pointer_type();
    let entry_sig = |cx: &mut Ctx, params: usize| {
        let mut sig: Signature = cx.module.make_signature();
        for _ in 0..params {
            sig.params.push(AbiParam::new(ptr));
        }
        sig.returns.push(AbiParam::new(I32));
        sig
    };
    let declare = |cx: &mut Ctx, name: &str, sig: &Signature| {
        cx.module
            .declare_function(name, Linkage::Export, sig)
            .map_err(cl("declare entry"))
    };
    // PREFIX_run_ex(batch, weights, inputs, outputs, workspace, par) is the ABI's general
    // entry point; the others forward to it.
    let xsig = entry_sig(cx, 6);
    let xname = format!("{}_run_ex", opts.prefix);
    let xid = declare(cx, &xname, &xsig)?;
    if iface.profiled {
        // PREFIX_run_profiled(…, par, hook, hook_ctx) holds the code; run_ex calls it
        // with a null hook.
        let fsig = entry_sig(cx, 8);
        let fname = format!("{}_run_profiled", opts.prefix);
        let fid = declare(cx, &fname, &fsig)?;
        define_body(cx, program, kernels, groups, iface, fid, fsig, &fname, true)?;
        let args: Vec<Arg> = (0..6)
            .map(Arg::Param)
            .chain([Arg::Null, Arg::Null])
            .collect();
        define_forward(cx, xid, xsig, fid, &xname, &args)?;
    } else {
        define_body(
            cx, program, kernels, groups, iface, xid, xsig, &xname, false,
        )?;
    }
    // PREFIX_run_parallel(inputs, outputs, workspace, par) = run_ex(0, NULL, …, par).
    let psig = entry_sig(cx, 4);
    let pname = format!("{}_run_parallel", opts.prefix);
    let pid = declare(cx, &pname, &psig)?;
    let args: Vec<Arg> = [Arg::Null, Arg::Null]
        .into_iter()
        .chain((0..4).map(Arg::Param))
        .collect();
    define_forward(cx, pid, psig, xid, &pname, &args)?;
    // PREFIX_run(inputs, outputs, workspace) = run_ex(0, NULL, …, NULL).
    let sig = entry_sig(cx, 3);
    let name = format!("{}_run", opts.prefix);
    let id = declare(cx, &name, &sig)?;
    let args: Vec<Arg> = [Arg::Null, Arg::Null]
        .into_iter()
        .chain((0..3).map(Arg::Param))
        .chain([Arg::Null])
        .collect();
    define_forward(cx, id, sig, xid, &name, &args)?;
    if let Some(w) = &iface.weights {
        define_check_weights(cx, opts, w)?;
    }
    Ok(())
}

/// An argument of a forwarding entry point: one of its own parameters, or a null.
#[derive(Clone, Copy)]
enum Arg {
    Param(usize),
    Null,
}

/// Defines `id` as a call of `target` with `args`.
fn define_forward(
    cx: &mut Ctx,
    id: FuncId,
    sig: Signature,
    target: FuncId,
    name: &str,
    args: &[Arg],
) -> Result<(), CodegenError> {
    let ptr = cx.module.target_config().pointer_type();
    let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    let pref = cx.module.declare_func_in_func(target, &mut func);
    {
        let mut b = FunctionBuilder::new(&mut func, &mut cx.fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            vals.push(match *a {
                Arg::Param(i) => *params
                    .get(i)
                    .ok_or_else(|| CodegenError::Internal(format!("{name}: parameter {i}")))?,
                Arg::Null => b.ins().iconst(ptr, 0),
            });
        }
        let call = b.ins().call(pref, &vals);
        let status = b.inst_results(call)[0];
        b.ins().return_(&[status]);
        b.seal_all_blocks();
        b.finalize(cx.module.target_config());
    }
    define_function(cx, id, func, || name.to_string())?;
    Ok(())
}

/// `int PREFIX_check_weights(const void *blob, size_t len)`: what every run checks of
/// the weights (null, alignment, magic, version, model hash, size), plus `len` and the
/// data hash over the whole file (`nnefc_runtime::weights::data_hash`, recomputed word
/// by word). Status 0, or NullPointer, Misaligned, InvalidWeights, WrongWeights.
fn define_check_weights(
    cx: &mut Ctx,
    opts: &BackendOptions,
    w: &super::weights::WeightsInfo,
) -> Result<(), CodegenError> {
    use nnefc_runtime::weights::{WEIGHTS_HEADER, field};
    let ptr = cx.module.target_config().pointer_type();
    let mut sig = cx.module.make_signature();
    sig.params.extend([AbiParam::new(ptr), AbiParam::new(ptr)]);
    sig.returns.push(AbiParam::new(I32));
    let name = format!("{}_check_weights", opts.prefix);
    let id = cx
        .module
        .declare_function(&name, Linkage::Export, &sig)
        .map_err(cl("declare check_weights"))?;
    let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    {
        let mut b = FunctionBuilder::new(&mut func, &mut cx.fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let (blob, len) = (p[0], p[1]);
        let fail = b.create_block();
        b.append_block_param(fail, I32);
        // The length first: the header checks below read 64 bytes.
        let short = b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThan, len, WEIGHTS_HEADER as i64);
        let code = b.ins().iconst(I32, Status::InvalidWeights as i64);
        let next = b.create_block();
        let null = b.ins().icmp_imm_s(IntCC::Equal, blob, 0);
        let nullc = b.ins().iconst(I32, Status::NullPointer as i64);
        let after_null = b.create_block();
        b.ins().brif(null, fail, &[nullc.into()], after_null, &[]);
        b.switch_to_block(after_null);
        b.ins().brif(short, fail, &[code.into()], next, &[]);
        b.switch_to_block(next);
        weights_header_checks(&mut b, blob, w, fail);
        // The file length must be the size the code was compiled with (the header's size
        // field was checked against it above).
        let bad_len = b.ins().icmp_imm_s(IntCC::NotEqual, len, w.size as i64);
        let code = b.ins().iconst(I32, Status::InvalidWeights as i64);
        let hash_blk = b.create_block();
        b.ins().brif(bad_len, fail, &[code.into()], hash_blk, &[]);
        b.switch_to_block(hash_blk);
        // FNV-1a over the data's 64-bit words.
        let flags = MemFlagsData::new().with_notrap().with_readonly();
        let i64t = cranelift_codegen::ir::types::I64;
        let lp = b.create_block();
        b.append_block_param(lp, ptr);
        b.append_block_param(lp, i64t);
        let body = b.create_block();
        let done = b.create_block();
        b.append_block_param(done, i64t);
        let start = b.ins().iadd_imm_s(blob, WEIGHTS_HEADER as i64);
        let end = b.ins().iadd(blob, len);
        let h0 = b.ins().iconst(i64t, 0xcbf2_9ce4_8422_2325u64 as i64);
        b.ins().jump(lp, &[start.into(), h0.into()]);
        b.switch_to_block(lp);
        let (q, h) = (b.block_params(lp)[0], b.block_params(lp)[1]);
        let at_end = b.ins().icmp(IntCC::Equal, q, end);
        b.ins().brif(at_end, done, &[h.into()], body, &[]);
        b.switch_to_block(body);
        let word = b.ins().load(i64t, flags, q, 0);
        let x = b.ins().bxor(h, word);
        let h2 = b.ins().imul_imm_s(x, 0x0000_0100_0000_01b3);
        let q2 = b.ins().iadd_imm_s(q, 8);
        b.ins().jump(lp, &[q2.into(), h2.into()]);
        b.switch_to_block(done);
        let h = b.block_params(done)[0];
        let stored = b.ins().load(i64t, flags, blob, field::DATA_HASH as i32);
        let expected = b.ins().iconst(i64t, w.data_hash as i64);
        let bad_data = b.ins().icmp(IntCC::NotEqual, h, stored);
        let code = b.ins().iconst(I32, Status::InvalidWeights as i64);
        let next = b.create_block();
        b.ins().brif(bad_data, fail, &[code.into()], next, &[]);
        b.switch_to_block(next);
        // A valid file with this model's hash but another data hash: another build.
        let other = b.ins().icmp(IntCC::NotEqual, stored, expected);
        let code = b.ins().iconst(I32, Status::WrongWeights as i64);
        let ok_blk = b.create_block();
        b.ins().brif(other, fail, &[code.into()], ok_blk, &[]);
        b.switch_to_block(ok_blk);
        return_status(&mut b, fail);
        b.seal_all_blocks();
        b.finalize(cx.module.target_config());
    }
    define_function(cx, id, func, || name.to_string())?;
    Ok(())
}

/// The O(1) checks of a weights file every run makes, branching to `fail(status)`:
/// alignment, magic, version and header size (InvalidWeights unless aligned), then the
/// model hash and size (WrongWeights). `blob` is not null and holds a 64-byte header.
fn weights_header_checks(
    b: &mut FunctionBuilder<'_>,
    blob: Value,
    w: &super::weights::WeightsInfo,
    fail: cranelift_codegen::ir::Block,
) {
    use nnefc_runtime::weights::{WEIGHTS_HEADER, WEIGHTS_MAGIC, WEIGHTS_VERSION, field};
    let i64t = cranelift_codegen::ir::types::I64;
    let check = |b: &mut FunctionBuilder<'_>, bad: Value, status: Status| {
        let next = b.create_block();
        let code = b.ins().iconst(I32, status as i64);
        b.ins().brif(bad, fail, &[code.into()], next, &[]);
        b.switch_to_block(next);
    };
    let low = b.ins().band_imm_s(blob, 63);
    let mis = b.ins().icmp_imm_s(IntCC::NotEqual, low, 0);
    check(b, mis, Status::Misaligned);
    let flags = MemFlagsData::new().with_notrap().with_readonly();
    let word = |b: &mut FunctionBuilder<'_>, at: usize| b.ins().load(i64t, flags, blob, at as i32);
    let magic = word(b, 0);
    let bad = b.ins().icmp_imm_s(
        IntCC::NotEqual,
        magic,
        u64::from_le_bytes(WEIGHTS_MAGIC) as i64,
    );
    check(b, bad, Status::InvalidWeights);
    debug_assert_eq!(field::HEADER, field::VERSION + 4);
    let vh = word(b, field::VERSION);
    let want = u64::from(WEIGHTS_VERSION) | ((WEIGHTS_HEADER as u64) << 32);
    let bad = b.ins().icmp_imm_s(IntCC::NotEqual, vh, want as i64);
    check(b, bad, Status::InvalidWeights);
    let hash = word(b, field::MODEL_HASH);
    let bad = b
        .ins()
        .icmp_imm_s(IntCC::NotEqual, hash, w.model_hash as i64);
    check(b, bad, Status::WrongWeights);
    let size = word(b, field::SIZE);
    let bad = b.ins().icmp_imm_s(IntCC::NotEqual, size, w.size as i64);
    check(b, bad, Status::WrongWeights);
}

/// The body of the entry point, with the parameters of `PREFIX_run_ex`: checks (batch,
/// weights header, pointers, alignment), then every step in order. With `profiled`, two
/// more parameters `hook, hook_ctx`: a non-null `hook(hook_ctx, step)` is called after
/// each step.
#[allow(clippy::too_many_arguments)]
fn define_body(
    cx: &mut Ctx,
    program: &Program,
    kernels: &[Option<FuncId>],
    groups: &[(std::ops::Range<usize>, Option<FuncId>)],
    iface: &ModelInterface,
    id: FuncId,
    sig: Signature,
    name: &str,
    profiled: bool,
) -> Result<(), CodegenError> {
    use cranelift_codegen::ir::{StackSlotData, StackSlotKind};
    let ptr = cx.module.target_config().pointer_type();
    let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig);
    let mut refs = Vec::new();
    for k in kernels {
        refs.push(k.map(|k| cx.module.declare_func_in_func(k, &mut func)));
    }
    // Per step: the group starting there (its end and its task function), if any.
    let mut group_at: Vec<Option<(usize, cranelift_codegen::ir::FuncRef)>> =
        vec![None; program.steps.len()];
    for (g, f) in groups {
        if let Some(f) = f {
            group_at[g.start] = Some((g.end, cx.module.declare_func_in_func(*f, &mut func)));
        }
    }
    // The runtime GEMM and depthwise conv, and the constants their calls read directly.
    let has_gemm = program.steps.iter().any(|s| matches!(s, Step::Gemm(_)));
    let has_dw = program.steps.iter().any(|s| matches!(s, Step::Window(_)));
    let mut import = |name: &str, params: usize| -> Result<_, CodegenError> {
        let mut sig = cx.module.make_signature();
        for _ in 0..params {
            sig.params.push(AbiParam::new(ptr));
        }
        let f = cx
            .module
            .declare_function(name, Linkage::Import, &sig)
            .map_err(cl("declare a runtime function"))?;
        Ok(cx.module.declare_func_in_func(f, &mut func))
    };
    let gemm_ref = if has_gemm {
        Some(import("nnefc_sgemm_batch_parallel", 5)?)
    } else {
        None
    };
    let prefetching = program
        .steps
        .iter()
        .any(|s| matches!(s, Step::Gemm(g) if g.prefetch.is_some()));
    let gemm_pf_ref = if prefetching {
        Some(import("nnefc_sgemm_batch_prefetch", 7)?)
    } else {
        None
    };
    let has_block = program.steps.iter().any(|s| matches!(s, Step::Block(_)));
    let block_ref = if has_block {
        Some(import("nnefc_inverted_residual", 2)?)
    } else {
        None
    };
    // One import per runtime window function the steps call, in the order of first use.
    let mut window_refs = Vec::new();
    for s in &program.steps {
        if let Step::Window(d) = s {
            let name = d.op.symbol();
            if !window_refs.iter().any(|&(n, _)| n == name) {
                window_refs.push((name, import(name, 2)?));
            }
        }
    }
    let mut const_gvs = Vec::new();
    for s in &program.steps {
        let bufs: Vec<BufId> = match s {
            Step::Gemm(g) => g.buffers(),
            Step::Window(d) => d.buffers(),
            Step::Block(k) => k.buffers(),
            _ => Vec::new(),
        };
        for bid in bufs {
            if let Some(BufKind::Const(c)) = program.buffer(bid).map(|b| b.kind)
                && !const_gvs.iter().any(|(x, _)| *x == c)
            {
                let did = *cx
                    .consts
                    .get(c)
                    .ok_or_else(|| CodegenError::Internal(format!("constant {c} missing")))?;
                const_gvs.push((c, cx.module.declare_data_in_func(did, &mut func)));
            }
        }
    }
    // The parallel_for callback: (pool, task, ctx, n_tasks).
    let mut tsig = cx.module.make_signature();
    for _ in 0..4 {
        tsig.params.push(AbiParam::new(ptr));
    }
    let tsig = func.import_signature(tsig);
    // The profile hook: (hook_ctx, step).
    let mut hsig = cx.module.make_signature();
    hsig.params.extend([AbiParam::new(ptr), AbiParam::new(ptr)]);
    let hsig = func.import_signature(hsig);
    let num_inputs = program
        .buffers
        .iter()
        .filter_map(|b| {
            if let BufKind::Input(i) = b.kind {
                Some(i + 1)
            } else {
                None
            }
        })
        .max()
        .unwrap_or(0);
    let num_outputs = program
        .buffers
        .iter()
        .filter_map(|b| {
            if let BufKind::Output(i) = b.kind {
                Some(i + 1)
            } else {
                None
            }
        })
        .max()
        .unwrap_or(0);
    // One task context for every parallel kernel: n_tasks, then the buffer pointers.
    let ctx_words = groups
        .iter()
        .map(|(g, _)| group_ctx_offsets(program, g.clone()).1)
        .filter(|&w| w > 0)
        .max();
    {
        let mut b = FunctionBuilder::new(&mut func, &mut cx.fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let (batch, weights) = (p[0], p[1]);
        let (inputs, outputs, ws, par) = (p[2], p[3], p[4], p[5]);
        let hook = profiled.then(|| (p[6], p[7]));
        let fail = b.create_block();
        b.append_block_param(fail, I32);
        // Guard: each check branches to `fail(status)`.
        let check = |b: &mut FunctionBuilder<'_>, bad: Value, status: Status| {
            let next = b.create_block();
            let code = b.ins().iconst(I32, status as i64);
            b.ins().brif(bad, fail, &[code.into()], next, &[]);
            b.switch_to_block(next);
        };
        let run_time_batch = iface.inputs.iter().any(|t| t.batched);
        if !run_time_batch {
            // A fixed-batch model runs only its compiled batch (0).
            let other_batch = b.ins().icmp_imm_s(IntCC::NotEqual, batch, 0);
            check(&mut b, other_batch, Status::ShapeMismatch);
        }
        if let Some(w) = &iface.weights {
            let z = b.ins().icmp_imm_s(IntCC::Equal, weights, 0);
            check(&mut b, z, Status::NullPointer);
            weights_header_checks(&mut b, weights, w, fail);
        }
        if num_inputs > 0 {
            let z = b.ins().icmp_imm_s(IntCC::Equal, inputs, 0);
            check(&mut b, z, Status::NullPointer);
        }
        if num_outputs > 0 {
            let z = b.ins().icmp_imm_s(IntCC::Equal, outputs, 0);
            check(&mut b, z, Status::NullPointer);
        }
        if program.workspace_size > 0 {
            let z = b.ins().icmp_imm_s(IntCC::Equal, ws, 0);
            check(&mut b, z, Status::NullPointer);
            let low = b.ins().band_imm_s(ws, 63);
            let mis = b.ins().icmp_imm_s(IntCC::NotEqual, low, 0);
            check(&mut b, mis, Status::Misaligned);
        }
        let flags = MemFlagsData::new().with_notrap().with_readonly();
        // workers = (par && par->parallel_for) ? max(par->workers, 1) : 1
        let workers = {
            let load_blk = b.create_block();
            let done = b.create_block();
            b.append_block_param(done, ptr);
            let one = b.ins().iconst(ptr, 1);
            let null = b.ins().icmp_imm_s(IntCC::Equal, par, 0);
            b.ins().brif(null, done, &[one.into()], load_blk, &[]);
            b.switch_to_block(load_blk);
            let pf = b.ins().load(ptr, flags, par, PAR_FOR);
            let w = b.ins().load(ptr, flags, par, PAR_WORKERS);
            let one = b.ins().iconst(ptr, 1);
            let w = b.ins().umax(w, one);
            let no_fn = b.ins().icmp_imm_s(IntCC::Equal, pf, 0);
            let w = b.ins().select(no_fn, one, w);
            b.ins().jump(done, &[w.into()]);
            b.switch_to_block(done);
            b.block_params(done)[0]
        };
        let psize = i32::from(ptr.bytes() as u8);
        let mut in_ptrs = Vec::new();
        for i in 0..num_inputs {
            let v = b.ins().load(ptr, flags, inputs, psize * i as i32);
            let z = b.ins().icmp_imm_s(IntCC::Equal, v, 0);
            check(&mut b, z, Status::NullPointer);
            in_ptrs.push(v);
        }
        let mut out_ptrs = Vec::new();
        for i in 0..num_outputs {
            let v = b.ins().load(ptr, flags, outputs, psize * i as i32);
            let z = b.ins().icmp_imm_s(IntCC::Equal, v, 0);
            check(&mut b, z, Status::NullPointer);
            out_ptrs.push(v);
        }
        let task_ctx = ctx_words.map(|w| {
            b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                (w * 8) as u32,
                3,
            ))
        });
        // One array of GemmArgs and one of epilogues, shared by every GEMM step; a step
        // with more products than BATCH_CHUNK hands them over in chunks.
        let chunk = program
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Gemm(g) => Some(g.batches.len().clamp(1, BATCH_CHUNK)),
                _ => None,
            })
            .max();
        let gemm_args = chunk.map(|n| {
            let slot = |b: &mut FunctionBuilder<'_>, bytes: u32| {
                b.create_sized_stack_slot(StackSlotData::new(
                    StackSlotKind::ExplicitSlot,
                    bytes * n as u32,
                    3,
                ))
            };
            (slot(&mut b, GEMM_ARGS_SIZE), slot(&mut b, EPILOGUE_SIZE))
        });
        let block_args = has_block.then(|| {
            b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                BLOCK_ARGS_SIZE,
                3,
            ))
        });
        let dw_args = has_dw.then(|| {
            b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                CONV_POOL_ARGS_SIZE.max(WINOGRAD_BAND_ARGS_SIZE),
                3,
            ))
        });
        // Run-time batch: the steps run once per sample (batch 0 means 1), with the
        // batched inputs and outputs advanced by one sample each time; the workspace is
        // reused, so it does not grow with the batch.
        let mut sample_loop = None;
        let (in_ptrs, out_ptrs) = if run_time_batch {
            let one = b.ins().iconst(ptr, 1);
            let zero_batch = b.ins().icmp_imm_s(IntCC::Equal, batch, 0);
            let n = b.ins().select(zero_batch, one, batch);
            let head = b.create_block();
            b.append_block_param(head, ptr);
            let body = b.create_block();
            let exit = b.create_block();
            let zero = b.ins().iconst(ptr, 0);
            b.ins().jump(head, &[zero.into()]);
            b.switch_to_block(head);
            let s = b.block_params(head)[0];
            let more = b.ins().icmp(IntCC::UnsignedLessThan, s, n);
            b.ins().brif(more, body, &[], exit, &[]);
            b.switch_to_block(body);
            let mut advance = |ptrs: &[Value], tensors: &[super::TensorInfo]| -> Vec<Value> {
                ptrs.iter()
                    .zip(tensors)
                    .map(|(&p, t)| {
                        if t.batched {
                            let bytes = (t.volume() * t.dtype.size()) as i64;
                            let off = b.ins().imul_imm_s(s, bytes);
                            b.ins().iadd(p, off)
                        } else {
                            p
                        }
                    })
                    .collect()
            };
            let ins = advance(&in_ptrs, &iface.inputs);
            let outs = advance(&out_ptrs, &iface.outputs);
            sample_loop = Some((head, exit, s));
            (ins, outs)
        } else {
            (in_ptrs, out_ptrs)
        };
        let buf_ptr = |b: &mut FunctionBuilder<'_>,
                       id: super::kernel::BufId|
         -> Result<Value, CodegenError> {
            let buf = program
                .buffer(id)
                .ok_or_else(|| CodegenError::Internal(format!("buffer b{} missing", id.0)))?;
            Ok(match buf.kind {
                BufKind::Input(i) => *in_ptrs
                    .get(i)
                    .ok_or_else(|| CodegenError::Internal("input".into()))?,
                BufKind::Output(i) => *out_ptrs
                    .get(i)
                    .ok_or_else(|| CodegenError::Internal("output".into()))?,
                BufKind::Workspace(off) => b.ins().iadd_imm_s(ws, off as i64),
                BufKind::Weights(off) => b.ins().iadd_imm_s(weights, off as i64),
                BufKind::Const(c) => {
                    let gv = const_gvs.iter().find(|(x, _)| *x == c).map(|(_, g)| *g);
                    let gv = gv.ok_or_else(|| {
                        CodegenError::Internal("constant passed as a kernel argument".into())
                    })?;
                    b.ins().symbol_value(ptr, gv)
                }
            })
        };
        let store = MemFlagsData::trusted();
        let mut group_end = 0usize;
        for (si, (step, fref)) in program.steps.iter().zip(&refs).enumerate() {
            if si < group_end {
                // Run (and reported to the hook) with its group.
                continue;
            }
            let group = group_at[si];
            match (step, fref) {
                (Step::Kernel(k), Some(f)) if is_parallel(k) => {
                    let slot =
                        task_ctx.ok_or_else(|| CodegenError::Internal("task context".into()))?;
                    let ctx = b.ins().stack_addr(ptr, slot, 0);
                    // One sub-context per kernel of the group: n, then its buffers.
                    let end = group.map_or(si + 1, |g| g.0);
                    let (offs, _) = group_ctx_offsets(program, si..end);
                    for (m, off) in (si..end).zip(&offs) {
                        let Step::Kernel(mk) = &program.steps[m] else {
                            return Err(CodegenError::Internal("group member".into()));
                        };
                        for (j, bid) in kernel_params(program, mk).into_iter().enumerate() {
                            let v = buf_ptr(&mut b, bid)?;
                            b.ins()
                                .store(store, v, ctx, psize * (*off as i32 + 1 + j as i32));
                        }
                    }
                    let f = &group.map_or(*f, |g| g.1);
                    let store_n = |b: &mut FunctionBuilder<'_>, n: Value| {
                        for off in &offs {
                            b.ins().store(store, n, ctx, psize * *off as i32);
                        }
                    };
                    let serial = b.create_block();
                    let multi = b.create_block();
                    let next = b.create_block();
                    let is_multi = b.ins().icmp_imm_s(IntCC::UnsignedGreaterThan, workers, 1);
                    b.ins().brif(is_multi, multi, &[], serial, &[]);
                    b.switch_to_block(serial);
                    let one = b.ins().iconst(ptr, 1);
                    store_n(&mut b, one);
                    let zero = b.ins().iconst(ptr, 0);
                    b.ins().call(*f, &[ctx, zero, zero]);
                    b.ins().jump(next, &[]);
                    b.switch_to_block(multi);
                    let want = b.ins().imul_imm_s(workers, TASKS_PER_WORKER);
                    let extent = b.ins().iconst(ptr, k.loops[0].extent as i64);
                    let n = b.ins().umin(want, extent);
                    store_n(&mut b, n);
                    let pool = b.ins().load(ptr, flags, par, PAR_POOL);
                    let pf = b.ins().load(ptr, flags, par, PAR_FOR);
                    let task = b.ins().func_addr(ptr, *f);
                    b.ins().call_indirect(tsig, pf, &[pool, task, ctx, n]);
                    b.ins().jump(next, &[]);
                    b.switch_to_block(next);
                    group_end = end;
                }
                (Step::Kernel(k), Some(f)) => {
                    let mut args = Vec::new();
                    for bid in kernel_params(program, k) {
                        args.push(buf_ptr(&mut b, bid)?);
                    }
                    b.ins().call(*f, &args);
                }
                (Step::Tiled { gemm, .. }, Some(f)) => {
                    let mut args = Vec::new();
                    for bid in gemm_params(program, gemm) {
                        args.push(buf_ptr(&mut b, bid)?);
                    }
                    b.ins().call(*f, &args);
                }
                (Step::Gemm(g), _) => {
                    let f_gemm = gemm_ref
                        .ok_or_else(|| CodegenError::Internal("gemm not declared".into()))?;
                    let (slot, epi_slot) =
                        gemm_args.ok_or_else(|| CodegenError::Internal("gemm args".into()))?;
                    let a = buf_ptr(&mut b, g.a.buf)?;
                    let bb = buf_ptr(&mut b, g.b.buf)?;
                    let c = buf_ptr(&mut b, g.c.buf)?;
                    let col_bias = match g.bias {
                        Some(bias) => Some(buf_ptr(&mut b, bias)?),
                        None => None,
                    };
                    let row_bias = match &g.epi.row_bias {
                        Some((bias, _)) => Some(buf_ptr(&mut b, *bias)?),
                        None => None,
                    };
                    let scratch = b.ins().iadd_imm_s(ws, g.scratch as i64);
                    let stride = b.ins().iconst(ptr, program.worker_scratch as i64);
                    let esz = 4i64;
                    for (bi, off) in g.batches.iter().enumerate() {
                        // Entry j of the current chunk.
                        let j = (bi % BATCH_CHUNK) as i32;
                        let epi = match (col_bias, row_bias, &g.epi.row_bias) {
                            (_, Some(rb), Some((_, offs))) => {
                                let o = offs.get(bi).copied().unwrap_or(0) * 4;
                                let p = b.ins().iadd_imm_s(rb, o);
                                Some((p, 1))
                            }
                            (Some(cb), _, _) => Some((cb, 2)),
                            _ => None,
                        };
                        let epi = if epi.is_none() && g.epi == Default::default() {
                            b.ins().iconst(ptr, 0)
                        } else {
                            let at = b.ins().stack_addr(ptr, epi_slot, j * EPILOGUE_SIZE as i32);
                            epilogue(&mut b, at, epi, &g.epi, ptr);
                            at
                        };
                        let ap = b.ins().iadd_imm_s(a, off[0] * esz);
                        let bp = b.ins().iadd_imm_s(bb, off[1] * esz);
                        let cp = b.ins().iadd_imm_s(c, off[2] * esz);
                        let iv = |b: &mut FunctionBuilder<'_>, x: i64| b.ins().iconst(ptr, x);
                        // GemmArgs: m n k a rsa csa a_packed b rsb csb c rsc epilogue.
                        let fields = [
                            iv(&mut b, g.m as i64),
                            iv(&mut b, g.n as i64),
                            iv(&mut b, g.k as i64),
                            ap,
                            iv(&mut b, g.a.rs),
                            iv(&mut b, g.a.cs),
                            iv(&mut b, g.a_packing.abi_value() as i64),
                            bp,
                            iv(&mut b, g.b.rs),
                            iv(&mut b, g.b.cs),
                            cp,
                            iv(&mut b, g.c.rs),
                            epi,
                        ];
                        let args = b.ins().stack_addr(ptr, slot, j * GEMM_ARGS_SIZE as i32);
                        for (i, v) in fields.into_iter().enumerate() {
                            b.ins().store(store, v, args, psize * i as i32);
                        }
                        let last = bi + 1 == g.batches.len();
                        if last || (bi + 1) % BATCH_CHUNK == 0 {
                            let first = b.ins().stack_addr(ptr, slot, 0);
                            let count = b.ins().iconst(ptr, i64::from(j) + 1);
                            let mut args = vec![first, count, par, scratch, stride];
                            // A later step's matrix to prefetch (`select::prefetch`).
                            let f = match (g.prefetch, gemm_pf_ref) {
                                (Some((buf, len)), Some(f)) => {
                                    args.push(buf_ptr(&mut b, buf)?);
                                    args.push(b.ins().iconst(ptr, len as i64));
                                    f
                                }
                                _ => f_gemm,
                            };
                            b.ins().call(f, &args);
                        }
                    }
                }
                (Step::Block(k), _) => {
                    let f = block_ref
                        .ok_or_else(|| CodegenError::Internal("block not declared".into()))?;
                    let slot =
                        block_args.ok_or_else(|| CodegenError::Internal("block args".into()))?;
                    let args = b.ins().stack_addr(ptr, slot, 0);
                    let iv = |b: &mut FunctionBuilder<'_>, x: i64| b.ins().iconst(ptr, x);
                    // BlockArgs: 18 extents, x, the expansion (matrix, format, bias,
                    // activation), the depthwise filter, bias and activation, the
                    // projection (matrix, format, bias), residual, y, the projection's
                    // activation, scratch and its stride per worker, the one-thread band
                    // and scratch, the input's extent and a direct expansion's window,
                    // then six f32 bounds.
                    let mut fields: Vec<Value> =
                        k.dims.iter().map(|&e| iv(&mut b, e as i64)).collect();
                    fields.push(buf_ptr(&mut b, k.x)?);
                    let (ea, elo, ehi) = k
                        .expand
                        .as_ref()
                        .map_or((0, 0.0, 0.0), |e| e.activation().runtime_code());
                    let (da, dlo, dhi) = k.dw_activation.runtime_code();
                    let (pa, plo, phi) = k.project.activation.runtime_code();
                    let mut window = [1, 1, 0, 0];
                    match &k.expand {
                        Some(Expansion::Pointwise(e)) => {
                            fields.push(buf_ptr(&mut b, e.matrix)?);
                            fields.push(iv(&mut b, e.packing.abi_value() as i64));
                            fields.push(buf_ptr(&mut b, e.bias)?);
                        }
                        Some(Expansion::Direct {
                            filter,
                            bias,
                            window: w,
                            ..
                        }) => {
                            fields.push(buf_ptr(&mut b, *filter)?);
                            fields.push(iv(&mut b, nnefc_runtime::EXPAND_DIRECT as i64));
                            fields.push(buf_ptr(&mut b, *bias)?);
                            window = *w;
                        }
                        None => {
                            fields.push(iv(&mut b, 0));
                            fields.push(iv(&mut b, 1));
                            fields.push(iv(&mut b, 0));
                        }
                    }
                    fields.push(iv(&mut b, ea));
                    fields.push(buf_ptr(&mut b, k.filter)?);
                    fields.push(buf_ptr(&mut b, k.dw_bias)?);
                    fields.push(iv(&mut b, da));
                    fields.push(buf_ptr(&mut b, k.project.matrix)?);
                    fields.push(iv(&mut b, k.project.packing.abi_value() as i64));
                    fields.push(buf_ptr(&mut b, k.project.bias)?);
                    fields.push(match k.residual {
                        Some(r) => buf_ptr(&mut b, r)?,
                        None => iv(&mut b, 0),
                    });
                    fields.push(buf_ptr(&mut b, k.y)?);
                    fields.push(iv(&mut b, pa));
                    fields.push(b.ins().iadd_imm_s(ws, k.scratch as i64));
                    fields.push(iv(&mut b, program.worker_scratch as i64));
                    match k.serial {
                        Some((band, at)) => {
                            fields.push(iv(&mut b, band as i64));
                            fields.push(b.ins().iadd_imm_s(ws, at as i64));
                        }
                        None => {
                            fields.push(iv(&mut b, 0));
                            fields.push(iv(&mut b, 0));
                        }
                    }
                    for e in k.input.into_iter().chain(window) {
                        fields.push(iv(&mut b, e as i64));
                    }
                    for (i, v) in fields.iter().enumerate() {
                        b.ins().store(store, *v, args, psize * i as i32);
                    }
                    let at = psize * fields.len() as i32;
                    for (i, x) in [elo, ehi, dlo, dhi, plo, phi].into_iter().enumerate() {
                        let v = b.ins().f32const(x);
                        b.ins().store(store, v, args, at + 4 * i as i32);
                    }
                    b.ins().call(f, &[args, par]);
                }
                (Step::Window(d), _) => {
                    let f_dw = window_refs
                        .iter()
                        .find(|&&(n, _)| n == d.op.symbol())
                        .map(|&(_, f)| f)
                        .ok_or_else(|| {
                            CodegenError::Internal("window kernel not declared".into())
                        })?;
                    let slot =
                        dw_args.ok_or_else(|| CodegenError::Internal("dwconv args".into()))?;
                    let args = b.ins().stack_addr(ptr, slot, 0);
                    let x = buf_ptr(&mut b, d.x.0)?;
                    let x = b.ins().iadd_imm_s(x, d.x.1 * 4);
                    let (filter, bias, bias_sc) = match d.op {
                        WindowOp::Conv { filter, bias }
                        | WindowOp::Dense { filter, bias, .. }
                        | WindowOp::WinogradFused { filter, bias, .. }
                        | WindowOp::ConvPool { filter, bias, .. } => {
                            (buf_ptr(&mut b, filter)?, buf_ptr(&mut b, bias.0)?, bias.1)
                        }
                        WindowOp::WinogradOut { bias } => {
                            let null = b.ins().iconst(ptr, 0);
                            (null, buf_ptr(&mut b, bias.0)?, bias.1)
                        }
                        WindowOp::Max | WindowOp::WinogradIn => {
                            let null = b.ins().iconst(ptr, 0);
                            (null, null, 0)
                        }
                    };
                    let res = match d.residual {
                        Some(r) => buf_ptr(&mut b, r)?,
                        None => b.ins().iconst(ptr, 0),
                    };
                    let y = buf_ptr(&mut b, d.y.0)?;
                    let (act, lo, hi) = d.activation.runtime_code();
                    // DwArgs: 14 extents, x, its 3 strides, filter, bias, bias stride,
                    // residual, y, its 3 strides, activation, then lo and hi as f32.
                    let mut fields: Vec<Value> = d
                        .dims
                        .iter()
                        .map(|&e| b.ins().iconst(ptr, e as i64))
                        .collect();
                    fields.push(x);
                    fields.extend(d.x.2.iter().map(|&st| b.ins().iconst(ptr, st)));
                    fields.push(filter);
                    fields.push(bias);
                    fields.push(b.ins().iconst(ptr, bias_sc));
                    fields.push(res);
                    fields.push(y);
                    fields.extend(d.y.1.iter().map(|&st| b.ins().iconst(ptr, st)));
                    fields.push(b.ins().iconst(ptr, act));
                    for (i, v) in fields.iter().enumerate() {
                        b.ins().store(store, *v, args, psize * i as i32);
                    }
                    let at = psize * fields.len() as i32;
                    let lo = b.ins().f32const(lo);
                    let hi = b.ins().f32const(hi);
                    b.ins().store(store, lo, args, at);
                    b.ins().store(store, hi, args, at + 4);
                    let conv_args = match d.op {
                        WindowOp::Dense { cin, groups, .. } => Some((cin, groups)),
                        WindowOp::WinogradFused { cin, .. } | WindowOp::ConvPool { cin, .. } => {
                            Some((cin, (0, 0)))
                        }
                        _ => None,
                    };
                    if let Some((cin, groups)) = conv_args {
                        for (i, v) in [cin as i64, groups.0, groups.1].into_iter().enumerate() {
                            let v = b.ins().iconst(ptr, v);
                            b.ins().store(store, v, args, at + 8 * (i as i32 + 1));
                        }
                    }
                    if let WindowOp::ConvPool {
                        pool: [poh, pow, ps, ppt, ppl],
                        ..
                    } = d.op
                    {
                        // The pool's DwArgs after the conv's ConvArgs: over the conv's
                        // output (`n, c, oh, ow` of the call), writing the call's output;
                        // no input, filter, bias or residual pointers, no activation.
                        let [n, c, _, _, oh, ow, ..] = d.dims;
                        let null = b.ins().iconst(ptr, 0);
                        let mut pool: Vec<Value> =
                            [n, c, oh, ow, poh, pow, 3, 3, ps, ps, 1, 1, ppt, ppl]
                                .iter()
                                .map(|&e| b.ins().iconst(ptr, e as i64))
                                .collect();
                        pool.extend([null; 8]);
                        pool.push(y);
                        pool.extend(d.y.1.iter().map(|&st| b.ins().iconst(ptr, st)));
                        pool.push(null);
                        trailing_dw_args(&mut b, args, &pool, psize);
                    }
                    if let WindowOp::WinogradFused {
                        banded: Some(band),
                        cin,
                        ..
                    } = d.op
                    {
                        // The input transform's DwArgs after the fused call's ConvArgs (whose
                        // `x`, the conv's input, the runtime does not read): over the conv's
                        // input in place, 6×6 tiles four apart, no V (each band's is in the
                        // scratch); then the band, the scratch and its stride per worker.
                        let [n, _, _, _, th, tw, ..] = d.dims;
                        let [ih, iw, ipt, ipl] = band.input;
                        let null = b.ins().iconst(ptr, 0);
                        let mut input: Vec<Value> =
                            [n, cin, ih, iw, th, tw, 6, 6, 4, 4, 1, 1, ipt, ipl]
                                .iter()
                                .map(|&e| b.ins().iconst(ptr, e as i64))
                                .collect();
                        input.push(x);
                        input.extend(d.x.2.iter().map(|&st| b.ins().iconst(ptr, st)));
                        input.extend([null; 9]);
                        trailing_dw_args(&mut b, args, &input, psize);
                        let tail = [
                            b.ins().iconst(ptr, band.band as i64),
                            b.ins().iadd_imm_s(ws, band.scratch as i64),
                            b.ins().iconst(ptr, program.worker_scratch as i64),
                        ];
                        let base = (CONV_ARGS_SIZE + DW_ARGS_SIZE) as i32;
                        for (i, v) in tail.into_iter().enumerate() {
                            b.ins().store(store, v, args, base + psize * i as i32);
                        }
                    }
                    b.ins().call(f_dw, &[args, par]);
                }
                _ => return Err(CodegenError::Internal("kernel without a function".into())),
            }
            if let Some((h, hctx)) = hook {
                // After step si (and the rest of its group): hook(hook_ctx, step) for each,
                // when a hook is given.
                for step in si..group_end.max(si + 1) {
                    let call_blk = b.create_block();
                    let next = b.create_block();
                    let none = b.ins().icmp_imm_s(IntCC::Equal, h, 0);
                    b.ins().brif(none, next, &[], call_blk, &[]);
                    b.switch_to_block(call_blk);
                    let idx = b.ins().iconst(ptr, step as i64);
                    b.ins().call_indirect(hsig, h, &[hctx, idx]);
                    b.ins().jump(next, &[]);
                    b.switch_to_block(next);
                }
            }
        }
        if let Some((head, exit, s)) = sample_loop {
            let next = b.ins().iadd_imm_s(s, 1);
            b.ins().jump(head, &[next.into()]);
            b.switch_to_block(exit);
        }
        return_status(&mut b, fail);
        b.seal_all_blocks();
        b.finalize(cx.module.target_config());
    }
    define_function(cx, id, func, || name.to_string())?;
    Ok(())
}

/// Compiles `func` as the body of `id`; `what` names it in an error.
fn define_function(
    cx: &mut Ctx,
    id: FuncId,
    func: Function,
    what: impl FnOnce() -> String,
) -> Result<(), CodegenError> {
    let mut ctx = cx.module.make_context();
    ctx.func = func;
    cx.module
        .define_function(id, &mut ctx)
        .map_err(|e| CodegenError::Cranelift(format!("{}: {e:?}", what())))
}

/// Ends an entry function: returns 0 from the current block, and from `fail` its
/// block parameter (the status the failed check chose).
fn return_status(b: &mut FunctionBuilder<'_>, fail: cranelift_codegen::ir::Block) {
    let ok = b.ins().iconst(I32, 0);
    b.ins().return_(&[ok]);
    b.switch_to_block(fail);
    let code = b.block_params(fail)[0];
    b.ins().return_(&[code]);
}

/// Writes the `DwArgs` that follows a `ConvArgs` at `args` (a conv-and-pool call's pool, a
/// banded Winograd call's input transform): its pointer-sized `words`, then bounds
/// `lo = hi = 0` (neither has an activation of its own).
fn trailing_dw_args(b: &mut FunctionBuilder<'_>, args: Value, words: &[Value], psize: i32) {
    let f = MemFlagsData::trusted();
    let base = CONV_ARGS_SIZE as i32;
    for (i, v) in words.iter().enumerate() {
        b.ins().store(f, *v, args, base + psize * i as i32);
    }
    let zero = b.ins().f32const(0.0);
    let at = base + psize * words.len() as i32;
    b.ins().store(f, zero, args, at);
    b.ins().store(f, zero, args, at + 4);
}

/// Writes a `GemmEpilogue` at `addr`: bias `(pointer, kind)` (1 per row, 2 per column),
/// the activation and accumulation of `epi`.
/// Layout (runtime `#[repr(C)]`, checked by a test): bias ptr @0, bias_kind u32 @8,
/// activation u32 @12, lo f32 @16, hi f32 @20, accumulate u32 @24; 32 bytes.
fn epilogue(
    b: &mut FunctionBuilder<'_>,
    addr: Value,
    bias: Option<(Value, i64)>,
    epi: &super::kernel::GemmEpi,
    ptr: cranelift_codegen::ir::Type,
) {
    let f = MemFlagsData::trusted();
    let (bp, kind) = match bias {
        Some((p, k)) => (p, k),
        None => (b.ins().iconst(ptr, 0), 0),
    };
    let (act, lo, hi) = epi.activation.runtime_code();
    b.ins().store(f, bp, addr, 0);
    let kind = b.ins().iconst(I32, kind);
    let act = b.ins().iconst(I32, act);
    let lo = b.ins().f32const(lo);
    let hi = b.ins().f32const(hi);
    let acc = b.ins().iconst(I32, i64::from(epi.accumulate));
    let zero = b.ins().iconst(I32, 0);
    b.ins().store(f, kind, addr, 8);
    b.ins().store(f, act, addr, 12);
    b.ins().store(f, lo, addr, 16);
    b.ins().store(f, hi, addr, 20);
    b.ins().store(f, acc, addr, 24);
    b.ins().store(f, zero, addr, 28);
}
