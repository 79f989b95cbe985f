import { typeErrors, writeDocExample } from './support/doc-example';

// jest only transpiles: this type-checks every doc page's runnable example together, under
// the repository's strict tsconfig, so what a reader copies compiles.
const DOCS = [
  'signals.md',
  'children.md',
  'identity.md',
  'scheduling.md',
  'concurrency.md',
  'rate-limiting.md',
  'operations-control.md',
  'cron.md',
  'schemas.md',
  'interceptors.md',
  'transactional-steps.md',
  'streams.md',
];

describe('doc examples compile', () => {
  it(`${DOCS.join(', ')}: no type errors`, () => {
    const files = DOCS.map((doc) => writeDocExample(doc).file);
    expect(typeErrors(files)).toEqual([]);
  }, 120_000);
});
