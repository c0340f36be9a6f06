import { test } from 'node:test';
import assert from 'node:assert/strict';
import { foundArticles, silenceEnded } from '../static/turn.js';

test('silenceEnded is the silence the server decided on, held turns included', () => {
  assert.equal(silenceEnded({ audioEndMs: 1200, decidedMs: 1700 }, 500), 500);
  assert.equal(silenceEnded({ audioEndMs: 1200, decidedMs: 2700 }, 500), 1500, 'held for unfinished words');
  assert.equal(silenceEnded({ audioEndMs: 1200 }, 500), 500, 'a server that does not say');
  assert.equal(silenceEnded({ audioEndMs: 1200, decidedMs: 1100 }, 500), 0);
});

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
