/** Polling for end-to-end suites, where the only view of the server is what its APIs answer. */

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every `intervalMs` until it returns true; throws `Error(message)` once `timeoutMs` have passed without. */
export async function waitFor(check: () => Promise<boolean>, { timeoutMs = 20_000, intervalMs = 100, message = 'condition not met in time' } = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await sleep(intervalMs);
  }
  throw new Error(message);
}
