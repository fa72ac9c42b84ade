import { readFileSync } from 'node:fs';
import { createLimiter } from '@floodgate/core';
import { Registry } from 'prom-client';
import { beforeAll, describe, expect, it } from 'vitest';
import { instrument } from './index.js';

// docs/grafana/floodgate.json is the dashboard the README tells users to import: every query
// in it must read series this package really exports, under labels they really carry.

interface Dashboard {
  templating: { list: { name: string; type: string; query: string | { query: string } }[] };
  panels: Panel[];
}
interface Panel {
  title: string;
  type: string;
  datasource?: { type: string; uid: string };
  targets?: { expr: string; legendFormat?: string; datasource?: { type: string; uid: string } }[];
  panels?: Panel[]; // a collapsed row keeps its panels inside
}

const dashboard: Dashboard = JSON.parse(readFileSync(new URL('../../../docs/grafana/floodgate.json', import.meta.url), 'utf8'));
const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== 'row');
const targets = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, ...t })));
const variables = dashboard.templating.list;
/** Variables Grafana defines itself. */
const builtIns = new Set(['__rate_interval', '__interval', '__range']);
/** How panels and queries name their data source: the `datasource` variable, so that an import asks for one. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's syntax for a variable, not a JavaScript template
const onDatasourceVariable = { type: 'prometheus', uid: '${datasource}' };

interface Selector {
  metric: string | undefined;
  matchers: { label: string; op: string; value: string }[];
}

/** What a PromQL expression reads: its selectors, the labels it groups by, the dashboard variables it uses. */
function parsePromQL(expr: string): { selectors: Selector[]; grouping: string[]; variables: string[] } {
  const used = [...expr.matchAll(/\$(?:\{(\w+)\}|(\w+))/g)].map((m) => (m[1] ?? m[2]) as string);
  const selectors: Selector[] = [];
  const grouping: string[] = [];
  let rest = expr
    .replace(/([a-zA-Z_:][\w:]*)?\s*\{([^}]*)\}/g, (_, metric: string | undefined, body: string) => {
      const matchers = [...body.matchAll(/([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g)].map((m) => ({
        label: m[1] as string,
        op: m[2] as string,
        value: m[3] as string,
      }));
      selectors.push({ metric, matchers });
      return ' ';
    })
    .replace(/\[[^\]]*\]/g, ' ') // range durations: [5m], [$__rate_interval]
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g, (_, labels: string) => {
      grouping.push(...labels.split(',').map((l) => l.trim()));
      return ' ';
    });
  // What is left: functions (followed by a parenthesis), operators, keywords, numbers, and metric names without braces.
  rest = rest.replace(/[a-zA-Z_:][\w:]*\s*\(/g, ' ');
  const keywords = new Set(['and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);
  for (const [name] of rest.matchAll(/(?<![\w.$])[a-zA-Z_:][\w:]*/g)) if (!keywords.has(name)) selectors.push({ metric: name, matchers: [] });
  return { selectors, grouping, variables: used };
}

/** Series name -> label name -> the values seen, read from the registry's real output. */
type Exported = Map<string, Map<string, Set<string>>>;

function exportedSeries(text: string): Exported {
  const series: Exported = new Map();
  for (const line of text.split('\n')) {
    const sample = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+\S+$/.exec(line);
    if (sample === null) continue;
    const labels = series.get(sample[1] as string) ?? new Map<string, Set<string>>();
    series.set(sample[1] as string, labels);
    for (const [, label, value] of (sample[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      const values = labels.get(label as string) ?? new Set<string>();
      values.add(value as string);
      labels.set(label as string, values);
    }
  }
  return series;
}

let exported: Exported;

beforeAll(async () => {
  // A few real decisions of each kind, so that every series has a sample and every label a value.
  const registry = new Registry();
  const api = createLimiter({ algorithm: 'fixed-window', limit: 2, windowMs: 60_000, now: () => Date.UTC(2026, 0, 1, 0, 0, 30) });
  instrument(api, { name: 'api', registry });
  for (let i = 0; i < 3; i++) await api.consume('k');
  const fail = () => Promise.reject(new Error('down'));
  const broken = createLimiter({ limit: 5, windowMs: 1_000, store: { consume: fail, peek: fail, refund: fail, reset: fail } });
  instrument(broken, { name: 'broken', registry });
  await broken.consume('k');
  await broken.refund('k');
  exported = exportedSeries(await registry.metrics());
});

describe('the Grafana dashboard (docs/grafana/floodgate.json)', () => {
  it('has panels with queries, all on the datasource variable', () => {
    expect(targets.length).toBeGreaterThanOrEqual(10);
    const datasource = variables.find((v) => v.name === 'datasource');
    expect(datasource).toMatchObject({ type: 'datasource', query: 'prometheus' });
    for (const p of panels) expect(p.datasource, p.title).toEqual(onDatasourceVariable);
    for (const t of targets) expect(t.datasource ?? onDatasourceVariable, t.panel).toEqual(onDatasourceVariable);
  });

  it('reads only series the package exports, under labels and values they carry', () => {
    expect([...exported.keys()]).toContain('floodgate_decisions_total'); // the registry did answer
    for (const { panel, expr } of targets) {
      const { selectors, grouping } = parsePromQL(expr);
      expect(selectors.length, `${panel}: ${expr}`).toBeGreaterThan(0);
      for (const { metric, matchers } of selectors) {
        const labels = exported.get(metric ?? '');
        expect(labels, `${panel}: ${metric} is not a series @floodgate/prometheus exports (${[...exported.keys()].join(', ')})`).toBeDefined();
        for (const { label, op, value } of matchers) {
          expect(labels?.has(label), `${panel}: ${metric} has no label ${label}`).toBe(true);
          // A literal value must be one the package writes (outcome="limited", not "denied").
          if (op === '=' && !value.includes('$')) expect([...(labels?.get(label) ?? [])], `${panel}: ${metric}{${label}="${value}"}`).toContain(value);
        }
        for (const label of grouping) expect(labels?.has(label), `${panel}: ${metric} has no label ${label} to group by`).toBe(true);
      }
    }
  });

  it('names in each legend only labels its query keeps', () => {
    for (const { panel, expr, legendFormat = '' } of targets) {
      const { grouping } = parsePromQL(expr);
      for (const [, label] of legendFormat.matchAll(/\{\{\s*(\w+)\s*\}\}/g)) expect(grouping, `${panel}: legend {{${label}}} of ${expr}`).toContain(label);
    }
  });

  it('uses only variables it defines, each defined from a real series and label', () => {
    const defined = new Set<string>();
    for (const v of variables) {
      if (v.type === 'query') {
        const query = typeof v.query === 'string' ? v.query : v.query.query;
        const values = /^label_values\((.+),\s*(\w+)\)$/.exec(query);
        expect(values, `variable ${v.name}: ${query}`).not.toBeNull();
        const { selectors, variables: used } = parsePromQL(values?.[1] as string);
        expect(selectors).toHaveLength(1);
        expect(exported.get(selectors[0]?.metric ?? '')?.has(values?.[2] as string), `variable ${v.name}: ${query}`).toBe(true);
        for (const name of used) expect(defined, `variable ${v.name} uses $${name} before it is defined`).toContain(name);
      }
      defined.add(v.name);
    }
    expect(defined).toEqual(new Set(['datasource', 'limiter', 'rule']));
    for (const { panel, expr } of targets) {
      for (const name of parsePromQL(expr).variables) expect(defined.has(name) || builtIns.has(name), `${panel}: $${name} is not defined`).toBe(true);
    }
  });

  it('shows every metric the package exports', () => {
    const shown = new Set(targets.flatMap((t) => parsePromQL(t.expr).selectors.map((s) => s.metric?.replace(/_(bucket|sum|count)$/, ''))));
    const families = new Set([...exported.keys()].map((name) => name.replace(/_(bucket|sum|count)$/, '')));
    expect([...families].filter((name) => !shown.has(name))).toEqual([]);
  });
});
