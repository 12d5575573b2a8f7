/**
 * The Node.js options a worker thread of ours starts with. Our threads load the packages' built
 * JavaScript, so the test runner's `source` export condition (which points workspace imports at
 * TypeScript sources Node cannot load) must not reach them; every other option should, as Node's
 * default passes them.
 *
 * Node's default (no `execArgv`) hands a thread the process's options, V8 and per-process ones
 * included (`--perf-basic-prof`, `--max-old-space-size`). A list given explicitly may not hold those:
 * `new Worker` throws ERR_WORKER_INVALID_EXEC_ARGV. So the list is given only when the source
 * condition has to go, and undefined (Node's default) otherwise.
 */
export function threadExecArgv(execArgv: readonly string[] = process.execArgv): string[] | undefined {
  const out: string[] = [];
  let dropped = false;
  for (let i = 0; i < execArgv.length; i++) {
    const a = execArgv[i] as string;
    if ((a === '--conditions' || a === '-C') && execArgv[i + 1] === 'source') {
      i += 1;
      dropped = true;
    } else if (a === '--conditions=source' || a === '-C=source') dropped = true;
    else out.push(a);
  }
  return dropped ? out : undefined;
}
