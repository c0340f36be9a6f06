import { test } from 'node:test';
import assert from 'node:assert/strict';
import { foundArticles } from '../static/turn.js';

test('foundArticles drops passages that matched nothing and repeated titles', () => {
  const got = foundArticles([
    { id: 'a#1', title: 'Tracking', score: 3 },
    { id: 'a#2', title: 'Tracking', score: 2 },
    { id: 'b#1', title: 'Gift cards', score: 0 },
    { id: 'c#1', title: 'Returns', score: 0.5 },
  ]);
  assert.deepEqual(got.map((p) => p.id), ['a#1', 'c#1']);
  assert.deepEqual(foundArticles(undefined), []);
});
