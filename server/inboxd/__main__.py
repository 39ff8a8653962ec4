from inboxd.serving.cli import main

raise SystemExit(main())
