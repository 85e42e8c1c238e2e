//! The launch-count bare run counts the calls the traced run records as
//! launches: the tracer's test of a name and kopt-model's `ApiKind::of`
//! agree, so the marks' ordinals and the traced run's launch calls count
//! the same calls.

use kopt_model::ApiKind;
use kopt_tracer::counts_as_launch;

#[test]
fn the_tracer_counts_what_the_analysis_calls_a_launch() {
    for name in [
        "cudaLaunchKernel_v7000",
        "cudaLaunchKernel_ptsz_v7000",
        "cudaLaunchKernelExC_v11060",
        "cuLaunchKernel",
        "cuLaunchKernel_ptsz",
        "cuLaunchKernelEx",
        "cudaLaunchCooperativeKernel_v9000",
        "cuLaunchCooperativeKernel",
        "cuLaunchGrid",
        "cudaGraphLaunch_v10000",
        "cuGraphLaunch",
        "cudaLaunchHostFunc_v10000",
        "cudaMemcpyAsync_v3020",
        "cudaStreamSynchronize_v3020",
        "cudaGraphInstantiate_v10000",
        "cudaConfigureCall_v3020",
    ] {
        let analysis = matches!(
            ApiKind::of(name),
            ApiKind::KernelLaunch | ApiKind::GraphLaunch
        );
        assert_eq!(counts_as_launch(name), analysis, "{name}");
    }
}
