// For the examples' checks: `node --import <this file> index.js` runs an example
// with Date.now, the limiters' default clock, standing still at the moment the
// process started. Nothing the checks count can then be reset by a window that
// ends, or refilled while a slow machine runs the requests. The examples
// themselves keep the real clock.
const startedAt = Date.now();
Date.now = () => startedAt;
