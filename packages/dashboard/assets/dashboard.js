// The dashboard's page: plain DOM calls against the JSON API beside it (api/*).
// Text from the API is always set as textContent, never as HTML.

const $ = (selector) => document.querySelector(selector);

/** Calls the API; rejects with the error's code and message as the server gave them. */
async function api(method, path, body) {
  const response = await fetch(`api/${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = response.status === 204 ? undefined : await response.json().catch(() => undefined);
  if (!response.ok) {
    const error = json?.error ?? {};
    throw new Error(`${error.code ? `${error.code}: ` : ''}${error.message ?? `HTTP ${response.status}`}`);
  }
  return json;
}

function say(message) {
  $('#error').textContent = '';
  $('#status').textContent = message;
}

function fail(error) {
  $('#status').textContent = '';
  $('#error').textContent = error.message;
}

function cell(row, text) {
  const td = document.createElement('td');
  td.textContent = String(text ?? '');
  row.append(td);
  return td;
}

function button(row, label, name, onClick) {
  const td = cell(row, '');
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  b.setAttribute('aria-label', `${label} ${name}`);
  b.addEventListener('click', () => onClick().catch(fail));
  td.append(b);
}

function fill(table, items, render) {
  const body = $(`${table} tbody`);
  body.replaceChildren(
    ...items.map((item) => {
      const row = document.createElement('tr');
      render(row, item);
      return row;
    }),
  );
}

const time = (ms) => (ms === undefined ? 'until deleted' : new Date(ms).toLocaleString());

async function loadRates() {
  const { perSecond, total } = await api('GET', 'rates');
  const now = new Map(perSecond.map((c) => [c.rule, c]));
  fill('#live', total, (row, c) => {
    cell(row, c.rule);
    cell(row, now.get(c.rule)?.allowed ?? 0);
    cell(row, now.get(c.rule)?.limited ?? 0);
    cell(row, c.allowed);
    cell(row, c.limited);
  });
}

async function loadTop() {
  const top = await api('GET', 'top?n=10');
  $('#top-off').hidden = top.analytics;
  $('#top').hidden = !top.analytics;
  $('#top-refresh').hidden = !top.analytics;
  if (!top.analytics) return;
  fill('#top', top.items, (row, k) => {
    for (const text of [k.key, k.scope, k.error > 0 ? `${k.denied} (±${k.error})` : k.denied]) cell(row, text);
  });
}

let blockedCursor = '';
async function loadBlocked(cursor = '') {
  const page = await api('GET', `blocked?count=50&cursor=${encodeURIComponent(cursor)}`);
  fill('#blocked', page.items, (row, b) => {
    for (const text of [b.key, b.scope, b.rule, time(b.untilMs), b.manual ? 'hand' : 'rule', b.reason]) cell(row, text);
    button(row, 'Unblock', b.key, async () => {
      await api('POST', 'unblock', { key: b.key, scope: b.scope, rule: b.rule });
      say(`Unblocked ${b.key} (${b.rule}).`);
      await loadBlocked();
    });
  });
  blockedCursor = page.cursor;
  $('#blocked-more').hidden = blockedCursor === '';
}

async function loadOverrides() {
  const page = await api('GET', 'overrides?count=100');
  $('#overrides-off').hidden = page.overrides;
  $('#override-form').hidden = !page.overrides;
  $('#overrides').hidden = !page.overrides;
  if (!page.overrides) return;
  fill('#overrides', page.items, (row, o) => {
    cell(row, o.key);
    cell(
      row,
      o.rules
        .map(
          ({ name, ...change }) =>
            `${name ?? ''} ${Object.entries(change)
              .map(([k, v]) => `${k} ${v}`)
              .join(', ')}`,
        )
        .join('; '),
    );
    cell(row, time(o.untilMs));
    button(row, 'Delete', o.key, async () => {
      await api('DELETE', `overrides?key=${encodeURIComponent(o.key)}`);
      say(`Override of ${o.key} deleted.`);
      await loadOverrides();
    });
  });
}

/** The rules in force, as last loaded: a block under one rule is made in its scope. */
let rules = [];
async function loadRules() {
  const answer = await api('GET', 'rules');
  rules = answer.rules;
  const editable = answer.editable;
  fill('#rules', rules, (row, r) => {
    for (const text of [r.name, r.scope, r.algorithm, r.limit, r.windowMs, r.burst ?? '', r.blockMs ?? '']) cell(row, text);
  });
  for (const select of [$('#block-form select[name=rule]'), $('#override-form select[name=rule]')]) {
    const keep = select.value;
    const first = select.closest('#block-form') ? [['', 'every rule']] : [];
    select.replaceChildren(
      ...[...first, ...rules.map((r) => [r.name, r.name])].map(([value, label]) => {
        const option = document.createElement('option');
        option.value = value;
        option.textContent = label;
        return option;
      }),
    );
    if ([...select.options].some((o) => o.value === keep)) select.value = keep;
  }
  $('#rules-form').hidden = !editable;
  if (editable && document.activeElement !== $('#rules-json')) $('#rules-json').value = JSON.stringify(rules, null, 2);
}

/** Wires a form: its fields become a call; the panels it changes reload after. */
function onSubmit(selector, act) {
  $(selector).addEventListener('submit', (event) => {
    event.preventDefault();
    act(new FormData(event.target)).catch(fail);
  });
}

const minutes = (value) => Math.round(Number(value) * 60_000);

onSubmit('#block-form', async (form) => {
  const body = { key: form.get('key'), ms: minutes(form.get('minutes')) };
  if (form.get('reason')) body.reason = form.get('reason');
  if (form.get('rule')) {
    body.rule = form.get('rule');
    body.scope = rules.find((r) => r.name === body.rule)?.scope;
  }
  await api('POST', 'block', body);
  say(`Blocked ${body.key}.`);
  await loadBlocked();
});

onSubmit('#override-form', async (form) => {
  const change = { name: form.get('rule'), limit: Number(form.get('limit')) };
  if (form.get('windowMs')) change.windowMs = Number(form.get('windowMs'));
  const body = { key: form.get('key'), rules: [change] };
  if (form.get('minutes')) body.ttlMs = minutes(form.get('minutes'));
  await api('POST', 'overrides', body);
  say(`Override of ${body.key} set.`);
  await loadOverrides();
});

onSubmit('#rules-form', async (form) => {
  let edited;
  try {
    edited = JSON.parse(form.get('rules'));
  } catch {
    throw new Error('The rules are not valid JSON.');
  }
  await api('POST', 'rules', { rules: edited });
  say('Rules published.');
  // The source applies them by pub/sub: give it a moment before showing what is in force.
  setTimeout(() => loadRules().catch(fail), 300);
});

$('#top-refresh').addEventListener('click', () => loadTop().catch(fail));
$('#blocked-refresh').addEventListener('click', () => loadBlocked().catch(fail));
$('#blocked-more').addEventListener('click', () => loadBlocked(blockedCursor).catch(fail));

Promise.all([loadRules(), loadRates(), loadTop(), loadBlocked(), loadOverrides()])
  .then(() => document.body.setAttribute('data-ready', ''))
  .catch(fail);
setInterval(() => loadRates().catch(fail), 1000);
