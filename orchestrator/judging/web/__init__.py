"""The browser judge (`orchestrator judge ... --web`): the blind judge served to a web browser
on the same `JudgeSource` as the Textual judge, driving the same `judging.session.JudgeSession`
(the queue and the label rules). `media` holds what the browser gets of the videos and stills,
`guard` the token and cross-site checks, `app` the HTTP interface (Starlette), `serve` the
server (uvicorn); `static/` is the page."""
