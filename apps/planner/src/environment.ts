/**
 * Every environment variable the planner reads, read here and nowhere else (packages take options).
 *
 * - `NO_COLOR`: set and not empty, human log lines on a terminal carry no colours (https://no-color.org).
 */
export interface PlannerEnvironment {
  noColor: boolean;
}

export function readPlannerEnvironment(env: NodeJS.ProcessEnv = process.env): PlannerEnvironment {
  return { noColor: (env['NO_COLOR'] ?? '') !== '' };
}
