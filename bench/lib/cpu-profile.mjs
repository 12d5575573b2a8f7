// Preloaded with `node --import` (NODE_OPTIONS) into a process the bench starts, so that Node versions
// that refuse --cpu-prof in NODE_OPTIONS can be profiled too: samples the main thread from start to
// exit and writes a .cpuprofile (the format `--cpu-prof` writes) into $BENCH_CPU_PROF_DIR.
// $BENCH_CPU_PROF_INTERVAL: the sampling interval in microseconds (default 200; finer for short requests).
import { mkdirSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.BENCH_CPU_PROF_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: Number(process.env.BENCH_CPU_PROF_INTERVAL ?? 200) });
  session.post('Profiler.start');
  // a session on the main thread answers synchronously, so this completes inside the exit handler
  process.on('exit', () => {
    session.post('Profiler.stop', (err, result) => {
      if (err) return;
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, `CPU.${process.pid}.cpuprofile`), JSON.stringify(result.profile));
    });
  });
}
