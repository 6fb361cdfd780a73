// The built-in copy catalog, compiled into the binary so that a job copied to /usr/local/bin or packaged
// as a Lambda `bootstrap` needs no resource bundle beside it. `pushctl copy export` writes it out as a
// file to edit; `--copy-catalog PATH` (or PUSH_COPY_CATALOG) replaces it.
let defaultCopyCatalogJSON = #"""
    {
      "diary_reminder": {
        "en": [
          {"title": "Time for today's entry", "body": "A few lines about your day are enough. How did it go?"},
          {"title": "How was your day?", "body": "Take a minute to write it down before it slips away."},
          {"title": "Your diary is waiting", "body": "Capture one moment from today, big or small."},
          {"title": "A quiet moment for you", "body": "What made you smile today? Jot it down in your diary."}
        ],
        "ja": [
          {"title": "今日の日記を書きましょう", "body": "一言だけでも大丈夫。今日はどんな一日でしたか？"},
          {"title": "今日はどんな一日でしたか？", "body": "忘れないうちに、少しだけ書き留めておきましょう。"},
          {"title": "日記が待っています", "body": "今日の出来事をひとつ、残してみませんか。"},
          {"title": "ひと息つきませんか", "body": "今日うれしかったことを日記に書いてみましょう。"}
        ],
        "de": [
          {"title": "Zeit für deinen Tagebucheintrag", "body": "Ein paar Zeilen über deinen Tag genügen. Wie war er?"},
          {"title": "Wie war dein Tag?", "body": "Nimm dir eine Minute und halte ihn fest, bevor er verblasst."},
          {"title": "Dein Tagebuch wartet", "body": "Schreib einen Moment von heute auf – groß oder klein."}
        ],
        "fr": [
          {"title": "C'est l'heure de votre journal", "body": "Quelques lignes suffisent. Comment s'est passée votre journée ?"},
          {"title": "Comment était votre journée ?", "body": "Prenez une minute pour l'écrire avant qu'elle ne s'efface."},
          {"title": "Votre journal vous attend", "body": "Notez un moment d'aujourd'hui, petit ou grand."}
        ],
        "es": [
          {"title": "Hora de escribir en tu diario", "body": "Unas pocas líneas bastan. ¿Qué tal tu día?"},
          {"title": "¿Cómo fue tu día?", "body": "Tómate un minuto para escribirlo antes de que se te olvide."},
          {"title": "Tu diario te espera", "body": "Guarda un momento de hoy, grande o pequeño."}
        ],
        "pt": [
          {"title": "Hora de escrever no diário", "body": "Bastam algumas linhas. Como foi o seu dia?"},
          {"title": "Como foi o seu dia?", "body": "Reserve um minuto para o registar antes que se esqueça."},
          {"title": "O seu diário está à espera", "body": "Guarde um momento de hoje, grande ou pequeno."}
        ],
        "pt-BR": [
          {"title": "Hora de escrever no seu diário", "body": "Algumas linhas já bastam. Como foi o seu dia?"},
          {"title": "Como foi o seu dia?", "body": "Tire um minutinho para registrar antes que você esqueça."},
          {"title": "Seu diário está esperando", "body": "Guarde um momento de hoje, grande ou pequeno."}
        ],
        "ko": [
          {"title": "오늘의 일기를 쓸 시간이에요", "body": "몇 줄이면 충분해요. 오늘 하루는 어땠나요?"},
          {"title": "오늘 하루 어땠나요?", "body": "잊기 전에 잠깐 적어 두세요."},
          {"title": "일기장이 기다리고 있어요", "body": "오늘의 순간 하나를 남겨 보세요."}
        ]
      },
      "content_limit_90": {
        "en": [{"title": "You're close to your limit", "body": "You've used {used} of {limit} entries on the free plan. Upgrade to keep writing without limits."}],
        "ja": [{"title": "上限に近づいています", "body": "無料プランの{limit}件中{used}件を使用しました。アップグレードすると制限なく書けます。"}],
        "de": [{"title": "Du hast dein Limit fast erreicht", "body": "Du hast {used} von {limit} Einträgen im kostenlosen Plan genutzt. Mit einem Upgrade schreibst du ohne Limit."}],
        "fr": [{"title": "Vous approchez de la limite", "body": "Vous avez utilisé {used} entrées sur {limit} avec l'offre gratuite. Passez à l'offre supérieure pour écrire sans limite."}],
        "es": [{"title": "Estás cerca de tu límite", "body": "Has usado {used} de {limit} entradas del plan gratuito. Mejora tu plan para escribir sin límites."}],
        "pt": [{"title": "Está perto do seu limite", "body": "Já usou {used} de {limit} entradas do plano gratuito. Faça upgrade para escrever sem limites."}],
        "pt-BR": [{"title": "Você está perto do limite", "body": "Você usou {used} de {limit} entradas do plano gratuito. Faça upgrade para escrever sem limites."}],
        "ko": [{"title": "한도에 가까워졌어요", "body": "무료 플랜의 {limit}개 중 {used}개를 사용했어요. 업그레이드하면 제한 없이 쓸 수 있어요."}]
      },
      "content_limit_100": {
        "en": [{"title": "You've reached your limit", "body": "You've used all {limit} entries on the free plan. Upgrade to keep writing."}],
        "ja": [{"title": "上限に達しました", "body": "無料プランの{limit}件をすべて使用しました。アップグレードして書き続けましょう。"}],
        "de": [{"title": "Du hast dein Limit erreicht", "body": "Du hast alle {limit} Einträge im kostenlosen Plan genutzt. Mit einem Upgrade schreibst du weiter."}],
        "fr": [{"title": "Vous avez atteint la limite", "body": "Vous avez utilisé les {limit} entrées de l'offre gratuite. Passez à l'offre supérieure pour continuer à écrire."}],
        "es": [{"title": "Has llegado a tu límite", "body": "Has usado las {limit} entradas del plan gratuito. Mejora tu plan para seguir escribiendo."}],
        "pt": [{"title": "Atingiu o seu limite", "body": "Já usou as {limit} entradas do plano gratuito. Faça upgrade para continuar a escrever."}],
        "pt-BR": [{"title": "Você atingiu o limite", "body": "Você usou as {limit} entradas do plano gratuito. Faça upgrade para continuar escrevendo."}],
        "ko": [{"title": "한도에 도달했어요", "body": "무료 플랜의 {limit}개를 모두 사용했어요. 업그레이드하고 계속 써 보세요."}]
      }
    }
    """#
