import { openResources } from './open-resources';

// Every test file must close what it opened: a pool, DataSource, engine or process left open
// fails the file instead of hanging or leaking into the next one.
afterAll(() => {
  const open = openResources();
  if (open.length > 0) {
    throw new Error(`test file left resources open: ${open.join(', ')}`);
  }
});
