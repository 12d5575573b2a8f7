// @switchyard/simulator: the cluster simulator. The router's selection policy, mocker engines and
// the planner's decide() in virtual time, fed by a trace; plus simulated profiling and the SVG chart writer
// its timeline plot is drawn with (the benchmark report draws its charts with it too).
export type { LatencySummary, SimulationProgress, SimulationResult, TimelinePoint } from './cluster-simulator.js';
export { MAX_INTERVAL_SAMPLES, simulate } from './cluster-simulator.js';
export type { CompiledSimulation, MockerConfig, SimRouterMode, SimulationOptions } from './options.js';
export { DEFAULT_MOCKER, MAX_SIM_REPLICAS, compileSimulationOptions } from './options.js';
export type { TraceRequest, TraceSource } from './trace.js';
export { ArrayTraceSource, JsonlTraceSource, MAX_TRACE_LINE_BYTES, MAX_TRACE_TIMESTAMP_MS, MAX_TRACE_TOKENS, parseTraceLine } from './trace.js';
export type { RateShape, SyntheticOptions } from './synthetic.js';
export { MAX_SYNTHETIC_RATE, MAX_SYNTHETIC_REQUESTS, SyntheticTraceSource, parseRateShape, peakRate, rateAt } from './synthetic.js';
export { promptTokens } from './prompt-tokens.js';
export { LogHistogram } from './histogram.js';
export type { ProfileGrid } from './profiler.js';
export { DEFAULT_PROFILE_GRID, profileMocker } from './profiler.js';
export type { GoalLine, Plot, PlotAxis, PlotSeries } from './svg-plot.js';
export { renderPlotSvg, renderTimelineSvg, timelinePlot } from './svg-plot.js';
export { formatResult } from './report.js';
