// Koa 2 is installed under the alias `koa2` to test both majors; its API is the one the adapter uses from Koa 3.
declare module 'koa2' {
  import Koa = require('koa');
  export = Koa;
}
