// The compiled app (tsc writes dist/ from src/). Run from the repository root: pnpm example nestjs-basic
import './dist/main.js';
