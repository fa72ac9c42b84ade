// Fastify 4 is installed under the alias `fastify4` to test both majors; the adapter uses the API the two share.
declare module 'fastify4' {
  import fastify = require('fastify');
  export = fastify;
}
