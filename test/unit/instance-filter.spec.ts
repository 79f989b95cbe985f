import { InvalidInputError } from '../../lib/errors/invalid-input.error';
import { isEmptyFilter, resolveInstanceFilter } from '../../lib/control/instance-filter';
import { countDriver, listDriver } from '../../lib/sql/query.sql';

// docs/design.md §27.7: a filter is validated before anything runs, and picks the index that
// drives its scan.
describe('instance filter (no database)', () => {
  it('resolves every field; an absent field does not narrow', () => {
    expect(isEmptyFilter(resolveInstanceFilter({}, 'f'))).toBe(true);
    expect(isEmptyFilter(resolveInstanceFilter(undefined, 'f'))).toBe(true);
    const at = new Date(0);
    expect(
      resolveInstanceFilter(
        { fsm: 'a', status: ['done', 'done', 'failed'], parentId: 12n, createdAfter: at },
        'f',
      ),
    ).toMatchObject({
      fsms: ['a'],
      statuses: ['done', 'failed'],
      parentId: '12',
      createdAfter: at,
    });
  });

  it.each([
    [{ status: 'finished' }, 'f.status', 'got "finished"'],
    [{ status: [] }, 'f.status', 'empty array'],
    [{ fsm: ['a', ''] }, 'f.fsm[1]', 'non-empty string'],
    [{ queue: 3 }, 'f.queue', 'non-empty string'],
    [{ parentId: 'x' }, 'f.parentId', 'positive bigint'],
    [{ updatedBefore: '2024-01-01' }, 'f.updatedBefore', 'valid Date'],
    [{ sort: 'id' }, 'f', 'unknown key(s) sort'],
    [[], 'f', 'must be an object'],
  ])('%j is refused at %s', (filter, path, text) => {
    let error: unknown;
    try {
      resolveInstanceFilter(filter, 'f');
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as InvalidInputError).path).toBe(path);
    expect((error as Error).message).toContain(text);
  });

  it('drives a list by the parent, failed or primary-key index, and a count also by pick and lease', () => {
    const drive = (f: object) => {
      const r = resolveInstanceFilter(f, 'f');
      return [listDriver(r), countDriver(r)];
    };
    expect(drive({})).toEqual(['scan', 'scan']);
    expect(drive({ status: 'failed', fsm: 'a' })).toEqual(['failed', 'failed']);
    expect(drive({ status: 'failed', parentId: '5' })).toEqual(['parent', 'parent']);
    expect(drive({ status: 'runnable' })).toEqual(['scan', 'runnable']);
    expect(drive({ status: 'runnable', queue: 'q' })).toEqual(['scan', 'runnable_queue']);
    expect(drive({ status: 'executing' })).toEqual(['scan', 'executing']);
    expect(drive({ status: ['executing', 'runnable'] })).toEqual(['scan', 'scan']);
  });
});
