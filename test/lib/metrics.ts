/** Reading a process's Prometheus text in end-to-end suites. */
import { get } from './tensors.js';

/** The Prometheus text a metrics door serves at `${metricsUrl}/metrics`. */
export const metricsText = async (metricsUrl: string): Promise<string> => (await get(`${metricsUrl}/metrics`)).body.toString('utf8');

/** Sum of every sample of `name` whose labels contain each of `labels` (`k="v"`). */
export function total(text: string, name: string, ...labels: string[]): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (m?.[1] !== name || !labels.every((l) => (m[2] ?? '').includes(l))) continue;
    sum += Number(m[3]);
  }
  return sum;
}

/** How many requests a router's text says it routed to the worker instance `instance`, over every model and mode. */
export const routingDecisions = (text: string, instance: string): number => total(text, 'switchyard_router_routing_decisions_total', `worker="${instance}"`);
