import { DEFAULTS } from './args.js';

export const HELP = `floodgate: operate a Floodgate limiter's state in Redis by hand

Usage: floodgate <command> [arguments] [flags]

Commands:
  inspect <key>                  every rule's state for the key (nothing is consumed)
  reset <key>                    forget the key in every rule: counts and blocks
  block <key> --for <duration>   deny the key until the duration passes or unblock
        [--reason <text>] [--rule <name>]
  unblock <key> [--rule <name>]  lift the key's blocks (by hand or a rule's); counts stay
  blocked [--count <n>] [--cursor <c>]
                                 the keys blocked now, a page at a time
  top [--n <n>] [--period <duration>]
                                 the n (10) keys denied most now and in the period
                                 before, over every process with analytics on;
                                 --period: the apps' analytics periodMs (default: ${DEFAULTS.period})
  rules get                      the rules --rules names
  rules apply <file> [--dry-run] validate a .json/.yaml rules file and publish it
                                 through the RedisRuleSource of --rules
  overrides set <key> --rule <name> --limit <n> [--window <duration>] [--burst <n>]
        [--ttl <duration>]       change a rule for the key (a prefix when it ends in '*'),
                                 replacing its override; repeat --rule for more rules,
                                 each followed by its own --limit, --window, --burst
  overrides get <key>            the key's override (exit 3 when it has none)
  overrides list [--count <n>] [--cursor <c>]
                                 the overrides in force, a page at a time
  overrides delete <key>         delete the key's override
  dashboard [--port <n>] [--host <address>] [--token <t>] [--period <duration>]
                                 serve @floodgate/dashboard for the limiter until
                                 SIGINT/SIGTERM: --port (default: ${DEFAULTS.port}; 0: any free port),
                                 --host (default: ${DEFAULTS.host}; another than loopback needs
                                 --token or $FLOODGATE_DASHBOARD_TOKEN, then sent as
                                 Authorization: Bearer <t>), --period as for top

Flags:
  --redis <url>        Redis to work on (default: $FLOODGATE_REDIS_URL, or ${DEFAULTS.redisUrl})
  --prefix <p>         the limiter's prefix (default: ${DEFAULTS.prefix})
  --store-prefix <p>   the RedisStore's prefix (default: none)
  --rules <file|key>   the limiter's rules: a rules file, or the Redis key of a
                       RedisRuleSource (default: ${DEFAULTS.rules})
  --scope <scope>=<key>  the key of another scope, for rules with a scope (repeatable)
  --timeout <duration> the longest wait for Redis, per step (default: ${DEFAULTS.timeout})
  --json               one JSON document on stdout
  -h, --help           this help

Durations: 500ms, 30s, 15m, 2h, 7d, 1h30m.
Exit codes: 0 done; 1 Redis unreachable, too slow or failing; 2 bad usage or
bad input (the ERR_FG_* code is on stderr); 3 nothing stored where --rules points,
or no override for the key (overrides get).
`;
