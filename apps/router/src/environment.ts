/**
 * Every environment variable the router reads, read here and nowhere else (packages take options).
 *
 * - `NO_COLOR`: set and not empty, human log lines on a terminal carry no colours (https://no-color.org).
 */
export interface RouterEnvironment {
  noColor: boolean;
}

export function readRouterEnvironment(env: NodeJS.ProcessEnv = process.env): RouterEnvironment {
  return { noColor: (env['NO_COLOR'] ?? '') !== '' };
}
